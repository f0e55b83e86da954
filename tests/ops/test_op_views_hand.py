"""op_calls, op_breakdown and module_breakdown on a hand-built rank, against hand-computed values.

Rank 0 (an H100, bf16), step 7: linear(x [4, 8], w [16, 8]) > mm([4, 8], [8, 16]) launching a
1 µs kernel, then add_([4, 16], [4, 16]) launching a 0.5 µs kernel; a backward mm under
autograd's evaluate_function launching a 2 µs kernel.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from support.analysis_rawdb import op_calls_of, register
from tracehouse.pipeline.warehouse.sql_runner import create_relations, sql_file

SQL = Path(__file__).resolve().parents[2] / "sql"

BF16 = '"c10::BFloat16"'
OPS = [
    # op_id, parent_id, kind, name, ts, dur, dims, types, module
    (1, None, "cpu_op", "aten::linear", 1000, 100, "[[4, 8], [16, 8], []]", f'[{BF16}, {BF16}, ""]', "fc"),
    (2, 1, "cpu_op", "aten::mm", 1010, 80, "[[4, 8], [8, 16]]", f"[{BF16}, {BF16}]", "fc"),
    (
        3,
        None,
        "cpu_op",
        "aten::add_",
        1200,
        20,
        "[[4, 16], [4, 16], []]",
        f'[{BF16}, {BF16}, "Scalar"]',
        None,
    ),
    (4, None, "cpu_op", "autograd::engine::evaluate_function: MmBackward0", 2000, 300, None, None, None),
    (5, 4, "cpu_op", "aten::mm", 2010, 200, "[[16, 4], [4, 8]]", f"[{BF16}, {BF16}]", None),
]
LAUNCHES = [(2, 1000, "fc"), (3, 500, None), (5, 2000, "fc")]  # op_id, dur_ns, module


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    return build(OPS, LAUNCHES)


def build(ops: list[tuple], launches: list[tuple]) -> duckdb.DuckDBPyConnection:
    """The hand-built rank's raw tables, with the relations under test over them."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE ops (study VARCHAR, run_id VARCHAR, rank INTEGER, op_id BIGINT, parent_id BIGINT, "
        "kind VARCHAR, name VARCHAR, ts_unix_ns BIGINT, dur_ns BIGINT, input_dims VARCHAR, "
        "input_types VARCHAR, concrete_inputs VARCHAR, module VARCHAR, pid VARCHAR DEFAULT '1', "
        "tid VARCHAR DEFAULT '1', content_hash VARCHAR DEFAULT 'h')"
    )
    con.executemany(
        "INSERT INTO ops VALUES ('s', 'r', 0, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, '1', '1', 'h')",
        [list(o) for o in ops],
    )
    con.execute(
        "CREATE TABLE op_launches (study VARCHAR, run_id VARCHAR, rank INTEGER, op_id BIGINT, "
        "dur_ns BIGINT, module VARCHAR)"
    )
    con.executemany("INSERT INTO op_launches VALUES ('s', 'r', 0, ?, ?, ?)", [list(x) for x in launches])
    con.execute(
        "CREATE TABLE steps AS SELECT 's' AS study, 'r' AS run_id, 0 AS rank, 7::BIGINT AS step, "
        "0::BIGINT AS ts_unix_ns, 10000::BIGINT AS dur_ns, '1' AS pid, '1' AS tid"
    )
    con.execute(
        "CREATE TABLE traces AS SELECT 's' AS study, 'r' AS run_id, 0 AS rank, 'h' AS content_hash, "
        f"{len(ops)}::BIGINT AS n_ops, 'NVIDIA H100 80GB HBM3' AS device_name"
    )
    register(con, "op_calls", op_calls_of(con))  # as the ingest task computes them
    # the relations under test, over the hand-built raw tables above
    wanted = ["seeds/device_peaks", "views/staging/op_rates", "views/marts/op_breakdown",
              "views/marts/module_breakdown",
              "views/staging/run_compute_efficiency"]  # fmt: skip
    files = [
        sql_file(w.rsplit("/", 1)[1], w.rsplit("/", 1)[0], (SQL / f"{w}.sql").read_text()) for w in wanted
    ]
    create_relations(con, files)
    return con


def test_op_breakdown_hand_computed(con) -> None:
    rows = con.execute(
        "SELECT op, module, calls, device_us, host_us, flops, bytes, achieved_tflops, achieved_gbps, "
        "intensity, bound_tflops, bound_frac FROM op_breakdown ORDER BY op, module NULLS LAST"
    ).fetchall()
    by_key = {(r[0], r[1]): r[2:] for r in rows}
    # the forward mm: 2·4·8·16 FLOPs, bf16 bytes 2·(32 + 128 + 64), 1 µs on the device
    calls, device_us, host_us, flops, moved, tflops, gbps, intensity, bound, frac = by_key[
        ("aten::mm", "fc")
    ][:10]
    assert (calls, device_us, host_us, flops, moved) == (2, 3.0, 0.28, 1024 + 1024, 448 + 2 * (64 + 32 + 128))
    assert tflops == pytest.approx(2048 / 3.0 / 1e6)
    assert gbps == pytest.approx(896 / 3.0 / 1e3)
    assert intensity == pytest.approx(2048 / 896)
    assert bound == pytest.approx(min(989.4e12, 2048 / 896 * 3.35e12) / 1e12)
    assert frac == pytest.approx(tflops / bound)
    # the composite linear carries no FLOPs (its mm does) and no bytes; its self time is 20 ns
    assert by_key[("aten::linear", "fc")][:5] == (1, 0.0, 0.02, 0, 0)
    # add_: 64 FLOPs, 3 bf16 tensors of 64 elements, 0.5 µs
    add = by_key[("aten::add_", None)]
    assert add[:5] == (1, 0.5, 0.02, 64, 384)
    # an op with no formula: NULL FLOPs and bound, never 0
    evaluate = by_key[("autograd::engine::evaluate_function: MmBackward0", None)]
    assert evaluate[3] is None and evaluate[8] is None


def test_compute_efficiency_is_time_at_the_bound_over_time(con) -> None:
    """scale_points' compute figures (run_compute_efficiency): the mm group (2,048 FLOPs in 3 µs) and
    add_ (64 FLOPs in 0.5 µs) have bounds; their time at the bound over their 3.5 µs."""
    mm_bound = min(989.4e12, 2048 / 896 * 3.35e12)  # FLOP/s
    add_bound = min(989.4e12, 64 / 384 * 3.35e12)
    at_bound_us = (2048 / mm_bound + 64 / add_bound) * 1e6
    ((efficiency, below_half, bounded),) = con.execute(
        "SELECT compute_efficiency, compute_below_half_bound_frac, compute_bounded_frac "
        "FROM run_compute_efficiency"
    ).fetchall()
    assert efficiency == pytest.approx(at_bound_us / 3.5, rel=1e-12)
    assert (below_half, bounded) == (1.0, 1.0)  # both far below half their bound; all time bounded


def test_op_time_without_a_bound_lowers_the_bounded_share_only() -> None:
    """An op without a formula launching a 1.5 µs kernel: 3.5 of the 5 µs of op time have a bound;
    the efficiency over the bounded ops is unchanged."""
    custom = (6, None, "cpu_op", "mylib::fused_thing", 3000, 50, "[[4, 16]]", f"[{BF16}]", None)
    with build([*OPS, custom], [*LAUNCHES, (6, 1500, None)]) as more, build(OPS, LAUNCHES) as base:
        query = "SELECT compute_efficiency, compute_bounded_frac FROM run_compute_efficiency"
        ((efficiency, bounded),) = more.execute(query).fetchall()
        ((base_efficiency, _),) = base.execute(query).fetchall()
    assert bounded == pytest.approx(3.5 / 5.0, rel=1e-12)
    assert efficiency == pytest.approx(base_efficiency, rel=1e-12)


def test_an_op_above_half_its_bound_is_outside_the_below_half_share() -> None:
    """A 1024^3 bf16 mm in 3 µs: 2^31 FLOPs, intensity 2^31 / (3 x 2 MiB) = 341 (compute-bound at
    989.4 TFLOP/s), 716 TFLOP/s reached: above half. 3.5 of the 6.5 bounded µs are below half."""
    big = (
        7,
        None,
        "cpu_op",
        "aten::mm",
        4000,
        50,
        "[[1024, 1024], [1024, 1024]]",
        f"[{BF16}, {BF16}]",
        "big",
    )
    with build([*OPS, big], [*LAUNCHES, (7, 3000, "big")]) as con:
        ((below_half, bounded),) = con.execute(
            "SELECT compute_below_half_bound_frac, compute_bounded_frac FROM run_compute_efficiency"
        ).fetchall()
        ((frac,),) = con.execute("SELECT bound_frac FROM op_breakdown WHERE module = 'big'").fetchall()
    assert frac == pytest.approx(2**31 / 3e-6 / 989.4e12, rel=1e-12)
    assert (below_half, bounded) == (pytest.approx(3.5 / 6.5, rel=1e-12), 1.0)
    with build([big], [(7, 3000, "big")]) as alone:  # nothing below half: 0, not NULL
        assert alone.execute(
            "SELECT compute_below_half_bound_frac FROM run_compute_efficiency"
        ).fetchall() == [(0.0,)]


def test_op_calls_phase_and_backward_module(con) -> None:
    rows = con.execute("SELECT op_id, phase, module, step FROM op_calls ORDER BY op_id").fetchall()
    assert rows == [
        (1, "forward", "fc", 7),
        (2, "forward", "fc", 7),
        (3, "forward", None, 7),
        (4, "backward", None, 7),
        (5, "backward", "fc", 7),  # no module of its own: its kernel's (the forward op's)
    ]


def test_module_breakdown_rolls_up_by_module_and_phase(con) -> None:
    rows = con.execute(
        "SELECT module, phase, calls, device_us, flops FROM module_breakdown "
        "ORDER BY module NULLS LAST, phase"
    ).fetchall()
    assert rows == [
        ("fc", "backward", 1, 2.0, 1024),
        ("fc", "forward", 2, 1.0, 1024),
        (None, "backward", 1, 0.0, None),
        (None, "forward", 1, 0.5, 64),
    ]


@pytest.mark.parametrize("relation", ["op_breakdown", "module_breakdown"])
def test_contract_columns_and_checks_hold(con, relation: str) -> None:
    from tracehouse.pipeline.warehouse.view_docs import contracts_by_relation

    contract = contracts_by_relation()[relation]
    got = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {relation})").fetchall())
    assert {c.name: c.type for c in contract.columns} == got
    for check in contract.checks:
        bad = con.execute(f"SELECT count(*) FROM {relation} WHERE ({check}) IS NOT TRUE").fetchall()
        assert bad == [(0,)], check
