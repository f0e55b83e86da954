"""The report's "Inside the step": what holds each step, the ops on their roofline, the critical path.

Hand-computed on a small fabricated set of the public views (a 64-rank run whose path visits three
ranks), and checked against the views themselves on the real sample study and shared GPU traces.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb
import polars as pl
import pytest
from conftest import REPEAT, UNRELATED_STUDY
from tracehouse.reports.charts import inside
from tracehouse.reports.source import open_warehouse

STUDY = "tiny-cpu-gloo"
WAIT_17 = "all_reduce waits for rank 17"
WAIT_63 = "all_gather waits for rank 63"
NOT_YET = "not computed yet: run `tracehouse project` (it stores the critical paths of the runs it replays)"


@pytest.fixture
def views() -> duckdb.DuckDBPyConnection:
    """The four public views the section reads, fabricated: run `big` (64 ranks) has a stored path."""
    con = duckdb.connect()
    con.sql("CREATE TABLE runs (study VARCHAR, run_id VARCHAR, strategy VARCHAR, world_size INTEGER)")
    con.sql("INSERT INTO runs VALUES ('s', 'big', 'ddp', 64), ('s', 'small', 'ddp', 8)")
    con.sql(
        "CREATE TABLE critical_path (study VARCHAR, run_id VARCHAR, step INTEGER, path_rank INTEGER, "
        "step_us DOUBLE, seq INTEGER, rank INTEGER, kind VARCHAR, op VARCHAR, start_us DOUBLE, "
        "dur_us DOUBLE, reason VARCHAR)"
    )
    path = [  # step 1 (100 ms): ranks 5 -> 17 -> 63
        (0, 5, "compute", "aten::mm", 0, 30_000),
        (1, 5, "host_gap", None, 30_000, 10_000),
        (2, 5, "wait", WAIT_17, 40_000, 0),
        (3, 17, "transfer", "nccl:all_reduce", 40_000, 20_000),
        (4, 17, "wait", WAIT_63, 60_000, 0),
        (5, 63, "compute", "aten::addmm", 60_000, 40_000),
    ]
    for seq, rank, kind, op, start, dur in path:
        con.execute(
            "INSERT INTO critical_path VALUES ('s', 'big', 1, 63, 100000, ?, ?, ?, ?, ?, ?, NULL)",
            [seq, rank, kind, op, start, dur],
        )
    # step 2 is shorter (90 ms): never the one drawn
    con.sql(
        "INSERT INTO critical_path VALUES ('s', 'big', 2, 0, 90000, 0, 0, 'compute', 'k', 0, 90000, NULL)"
    )
    con.execute(  # a run without a stored path: one row, its reason
        "INSERT INTO critical_path (study, run_id, reason) VALUES ('s', 'small', ?)", [NOT_YET]
    )
    con.sql(
        "CREATE TABLE op_breakdown (study VARCHAR, run_id VARCHAR, op VARCHAR, work_us DOUBLE, flops BIGINT)"
    )
    con.sql(
        "INSERT INTO op_breakdown VALUES ('s', 'big', 'aten::mm', 600, 1000000000), "
        "('s', 'big', 'c10d::allreduce_', 900, NULL), ('s', 'big', 'aten::addmm', 400, 100000000)"
    )
    con.sql("CREATE TABLE scale_points (study VARCHAR, run_id VARCHAR, compute_efficiency DOUBLE)")
    con.sql("INSERT INTO scale_points VALUES ('s', 'big', 0.45), ('s', 'small', NULL)")
    yield con
    con.close()


def test_one_sentence_per_scale_point_names_what_holds_its_step(views) -> None:
    sentences = inside.point_sentences(inside.point_rows(views, "s"))
    assert sentences == [
        f"small (ddp, 8 devices): no critical path ({NOT_YET}).",
        # compute 30 + 40 of 100 ms, the transfer 20, the host gap 10; aten::mm 600 of 1,900 µs of op
        # time (the collective's 900 µs has no FLOPs, so it is not the top op)
        "big (ddp, 64 devices): its slowest step (1, 100.0 ms replayed) is held by compute 70%, transfers "
        "20% and host gaps 10% of its critical path, across ranks 5, 17 and 63, changing rank 2 times at a "
        "collective; its top op with FLOPs is aten::mm (32% of op time), and compute ran at 45% of its "
        "roofline bound.",
    ]
    assert inside.point_sentences(inside.point_rows(views, "s"), strategy="fsdp") == []


def test_the_path_is_drawn_on_the_ranks_it_visits_only(views) -> None:
    rows = inside.path_rows(views, "s")
    got = [(r["lane"], r["kind"], r["start_ms"], r["end_ms"], r["op"]) for r in rows.iter_rows(named=True)]
    slice_ms = 100 / inside.BINS
    # the slowest step of the largest run: 3 lanes of 64 ranks; each segment starts and ends on a slice
    # edge here, so each is one stretch; a wait is one slice wide, drawn last (over the rest)
    assert got == [
        ("rank 5", "compute", 0.0, 30.0, "aten::mm"),
        ("rank 5", "host_gap", 30.0, 40.0, None),
        ("rank 17", "transfer", 40.0, 60.0, "nccl:all_reduce"),
        ("rank 63", "compute", 60.0, 100.0, "aten::addmm"),
        ("rank 5", "wait", 40.0, round(40 + slice_ms, 4), WAIT_17),
        ("rank 17", "wait", 60.0, round(60 + slice_ms, 4), WAIT_63),
    ]
    assert set(rows["step"]) == {1} and set(rows["run_id"]) == {"big"}
    assert set(rows.filter(pl.col("kind") != "wait")["kind_share"]) == {1.0}
    spec = inside.path_chart(views, "s").to_dict()
    assert spec["spec"]["encoding"]["y"]["sort"] == {"field": "rank", "op": "min"}


def test_a_stretch_is_coloured_by_the_kind_that_fills_most_of_it() -> None:
    con = duckdb.connect()
    con.sql("CREATE TABLE runs AS SELECT 's' AS study, 'r' AS run_id, 'ddp' AS strategy, 2 AS world_size")
    # 240 µs step: 1 µs slices; a 0.3 µs host gap inside slice 10 loses it to the compute around it
    con.sql(
        "CREATE TABLE critical_path AS SELECT * FROM (VALUES "
        "('s', 'r', 0, 0, 240.0, 0, 0, 'compute', 'k1', 0.0, 10.2, NULL), "
        "('s', 'r', 0, 0, 240.0, 1, 0, 'host_gap', NULL, 10.2, 0.3, NULL), "
        "('s', 'r', 0, 0, 240.0, 2, 0, 'compute', 'k2', 10.5, 229.5, NULL)) "
        "AS t(study, run_id, step, path_rank, step_us, seq, rank, kind, op, start_us, dur_us, reason)"
    )
    rows = inside.path_rows(con, "s")
    assert rows.select("kind", "start_ms", "end_ms").rows() == [("compute", 0.0, 0.24)]
    # the stretch holds 239.7 µs of compute in 240: the host gap shows in its share, and the op
    # named is the one with the most time in it
    assert rows["kind_share"].to_list() == [0.999] and rows["op"].to_list() == ["k2"]


@pytest.fixture(scope="module")
def con(grain_warehouse: Path):
    connection = open_warehouse(grain_warehouse)
    yield connection
    connection.close()


def _oracle_roofline(con, study: str) -> dict:
    """Each run's top ops with FLOPs and bytes, pooled over steps and ranks, from op_breakdown's rows."""
    ops = con.sql("SELECT * FROM op_breakdown WHERE study = $1", params=[study]).pl()
    expected = {}
    for (run_id,), rows in ops.group_by("run_id"):
        windows = rows.select("step", "rank").unique().height
        pooled = (
            rows.group_by("op")
            .agg(
                pl.col("work_us").sum(),
                pl.col("flops").sum(),
                pl.col("bytes").sum(),
                (pl.col("flops") / pl.col("bound_tflops") / 1e6).sum().alias("bound_us"),
                (pl.col("bound_tflops").is_null() & (pl.col("flops") > 0)).any().alias("unbounded"),
            )
            .filter((pl.col("flops") > 0) & (pl.col("bytes") > 0) & (pl.col("work_us") > 0))
            .sort(["work_us", "op"], descending=[True, False])
            .head(inside.TOP_OPS)
        )
        for op in pooled.iter_rows(named=True):
            expected[(run_id, op["op"])] = (
                op["work_us"] / windows / 1e3,
                op["flops"] / op["work_us"] / 1e3,
                op["flops"] / op["bytes"],
                None if op["unbounded"] else op["bound_us"] / op["work_us"],
            )
    return expected


@pytest.mark.parametrize("study", [STUDY, UNRELATED_STUDY])
def test_roofline_points_are_op_breakdown_pooled_per_run(con, study: str) -> None:
    spec = inside.roofline_chart(con, study).to_dict()
    rows = [row for values in spec["datasets"].values() for row in values]
    got = {
        (r["run_id"], r["op"]): (r["ms_per_step"], r["achieved_gflops"], r["intensity"], r["bound_frac"])
        for r in rows
    }
    expected = _oracle_roofline(con, study)
    assert got.keys() == expected.keys()
    for key, (ms, gflops, intensity, frac) in expected.items():
        assert got[key][:3] == pytest.approx((ms, gflops, intensity), rel=1e-9), key
        assert got[key][3] == (None if frac is None else pytest.approx(frac, rel=1e-9)), key
    if study == STUDY:
        assert {r["run_id"] for r in rows} >= {REPEAT, "ddp-ws2"}  # a repeat is its own panel, not summed
        assert all(r["bound_frac"] is None for r in rows)  # a CPU has no roofline
    else:
        # the H100 trace has peaks: each bounded op sits at or under its bound
        bounded = [r for r in rows if r["bound_frac"] is not None]
        assert {r["run_id"] for r in bounded} >= {"h100_bert_small"}
        assert all(0 < r["bound_frac"] <= 1 + 1e-9 for r in bounded)
    assert spec["facet"]["field"] == "panel" and "resolve" not in spec


def test_the_path_drawn_is_the_slowest_step_of_each_strategys_largest_run(con) -> None:
    rows = inside.path_rows(con, STUDY)
    expected = con.sql(
        "WITH largest AS (SELECT strategy, max(world_size) AS ws FROM runs WHERE study = $1 GROUP BY 1), "
        "runs_of AS (SELECT r.run_id FROM runs r JOIN largest l "
        "ON l.strategy = r.strategy AND l.ws = r.world_size WHERE r.study = $1), "
        "steps AS (SELECT run_id, step, any_value(step_us) AS us FROM critical_path "
        "WHERE study = $1 AND kind IS NOT NULL GROUP BY 1, 2) "
        "SELECT s.run_id, s.step, s.us FROM steps s JOIN runs_of USING (run_id) "
        "QUALIFY row_number() OVER (PARTITION BY s.run_id ORDER BY s.us DESC, s.step) = 1",
        params=[STUDY],
    ).fetchall()
    assert {(r, s) for r, s, _ in expected} == set(rows.select("run_id", "step").unique().rows())
    for run_id, step, step_us in expected:
        lanes = rows.filter((pl.col("run_id") == run_id) & (pl.col("kind") != "wait"))
        visited = con.sql(
            "SELECT DISTINCT 'rank ' || rank FROM critical_path "
            "WHERE study = $1 AND run_id = $2 AND step = $3",
            params=[STUDY, run_id, step],
        ).fetchall()
        assert set(lanes["lane"]) == {v for (v,) in visited}
        # the stretches of a lane never overlap, and together the lanes cover the whole step
        covered = []
        for (_,), lane in lanes.group_by("lane"):
            spans = sorted(lane.select("start_ms", "end_ms").rows())
            assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(spans))
            covered += spans
        covered.sort()
        assert covered[0][0] == 0 and covered[-1][1] == pytest.approx(step_us / 1e3, abs=1e-4)
        reach = 0.0
        for start, end in covered:
            assert start <= reach + 1e-4, (run_id, start, reach)
            reach = max(reach, end)


def test_every_run_gets_one_sentence(con) -> None:
    runs = [r for (r,) in con.sql("SELECT run_id FROM runs WHERE study = $1", params=[STUDY]).fetchall()]
    sentences = inside.point_sentences(inside.point_rows(con, STUDY))
    assert sorted(s.split(" (")[0] for s in sentences) == sorted(runs)
    assert all("critical path" in s and s.endswith(".") for s in sentences)
