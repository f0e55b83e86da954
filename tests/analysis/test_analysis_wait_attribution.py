"""METHODOLOGY "Why the step waits": exposed shares and idle causes, exact to the ns.

Hand-computed traces for each case the contract names, a brute-force oracle (every ns instant
of small generated traces, Hypothesis) against the SQL, and the sums on every real trace.
"""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise
from math import floor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.analysis_rawdb import US, ev, kernel, raw_db, rows, step
from tracehouse.pipeline.common.comm_vocabulary import COMM_SPAN_PREFIXES, LABEL_START
from tracehouse.sql import __file__ as sql_init

COMM = "ncclDevKernel_AllReduce_Sum_f32"


def call(name: str, ts_us: float, dur_us: float, *, seq: int, op: str = "all_reduce", **keys) -> dict:
    """A collectives_raw row as the parser writes it for one communication kernel or gloo span."""
    return {
        "op": op,
        "process_group": "0",
        "pg_desc": "default_pg",
        "seq": seq,
        "bytes": 4096,
        "dtype": "float32",
        "group_size": 2,
        "ts_unix_ns": round(ts_us * US),
        "dur_ns": round(dur_us * US),
        "source": "nccl_kernel",
        "name": name,
        "tid": "7",
        **keys,
    }


def exposure(con, **where) -> list[dict]:
    cond = " AND ".join(f"{k} = {v!r}" for k, v in where.items()) or "true"
    return rows(
        con,
        "SELECT rank, step, name, op, phase, parallel_dim, in_window_us, exposed_us, exposed_wait_us, "
        f"exposed_transfer_us FROM comm_exposure WHERE {cond} ORDER BY rank, step, start_unix_ns, name",
    )


def idle(con) -> list[dict]:
    return rows(
        con,
        "SELECT rank, step, idle_us, idle_host_wait_us, idle_device_wait_us, idle_unknown_us "
        "FROM idle_causes ORDER BY rank, step",
    )


# --- hand-computed traces -------------------------------------------------------------------


def test_two_overlapping_collectives_on_two_streams_split_the_exposed_instants():
    # compute [0,10); A [0,40) on stream 1, B [20,60) on stream 2: exposed [10,60) = 50 µs;
    # A: [10,20) alone + half of [20,40) = 20; B: half of [20,40) + [40,60) alone = 30
    con = raw_db(
        events=[
            ev("runtime", "cudaLaunchKernel", 0, 1, correlation=1),
            ev("runtime", "cudaLaunchKernel", 1, 1, correlation=2),
            ev("runtime", "cudaLaunchKernel", 2, 1, correlation=3),
            kernel("gemm", 0, 10, launch_us=0, correlation=1),
            kernel(COMM, 0, 40, stream=1, launch_us=1, correlation=2),
            kernel("ncclDevKernel_AllGather", 20, 40, stream=2, launch_us=2, correlation=3),
        ],
        steps=[step(1, 0, 5)],
    )
    got = exposure(con)
    assert [(r["name"], r["exposed_us"]) for r in got] == [(COMM, 20.0), ("ncclDevKernel_AllGather", 30.0)]
    assert (
        sum(r["exposed_us"] for r in got)
        == rows(con, "SELECT exposed_comm_us FROM step_breakdown")[0]["exposed_comm_us"]
    )
    assert {r["phase"] for r in got} == {"forward"}  # launched inside ProfilerStep#1, no other context
    assert all(r["exposed_wait_us"] is None for r in got)  # no collectives rows: nothing matched


def test_a_collective_split_across_two_windows_gets_a_row_in_each():
    # step 1 launches gemm [0,50) and the all-reduce [80,130); step 2 launches gemm [100,110) and
    # [140,150): window 1 = [0,100) holds [80,100) of it (exposed), window 2 = [100,150) the rest,
    # [100,110) of it under compute
    con = raw_db(
        events=[
            ev("runtime", "cudaLaunchKernel", 1, 1, correlation=1),
            ev("runtime", "cudaLaunchKernel", 2, 1, correlation=2),
            ev("runtime", "cudaLaunchKernel", 20, 1, correlation=3),
            ev("runtime", "cudaLaunchKernel", 21, 1, correlation=4),
            kernel("gemm", 0, 50, launch_us=1, correlation=1),
            kernel(COMM, 80, 50, stream=1, launch_us=2, correlation=2),
            kernel("gemm", 100, 10, launch_us=20, correlation=3),
            kernel("gemm", 140, 10, launch_us=21, correlation=4),
        ],
        steps=[step(1, 0, 10), step(2, 10, 20)],
    )
    got = exposure(con)
    assert [(r["step"], r["in_window_us"], r["exposed_us"]) for r in got] == [
        (1, 20.0, 20.0),
        (2, 30.0, 20.0),
    ]
    assert rows(con, "SELECT step, exposed_comm_us FROM step_breakdown ORDER BY step") == [
        {"step": 1, "exposed_comm_us": 20.0},
        {"step": 2, "exposed_comm_us": 20.0},
    ]


def test_a_straggler_ranks_collective_is_mostly_wait():
    # all_reduce seq 0: rank 0 enters at 10 and finishes at 110 (100 µs), rank 1 enters late, at 90
    # (20 µs): transfer = 20 µs; rank 0 waits its first 80 µs, rank 1 not at all
    events, collectives = [], []
    for rank, start in ((0, 10), (1, 90)):
        events += [
            ev("runtime", "cudaLaunchKernel", 0, 1, correlation=1, rank=rank),
            ev("runtime", "cudaLaunchKernel", 1, 1, correlation=2, rank=rank),
            kernel("gemm", 0, 10, launch_us=0, correlation=1, rank=rank),
            kernel(COMM, start, 110 - start, stream=1, launch_us=1, correlation=2, rank=rank),
        ]
        collectives.append(call(COMM, start, 110 - start, seq=0, rank=rank))
    con = raw_db(events=events, steps=[step(1, 0, 5, rank=r) for r in (0, 1)], collectives=collectives)
    got = exposure(con)
    assert [(r["rank"], r["exposed_us"], r["exposed_wait_us"], r["exposed_transfer_us"]) for r in got] == [
        (0, 100.0, 80.0, 20.0),
        (1, 20.0, 0.0, 20.0),
    ]
    assert {(r["op"], r["parallel_dim"]) for r in got} == {("all_reduce", "world")}  # default_pg, no layout
    by_collective = rows(con, "SELECT * FROM exposed_comm_by_collective")
    assert len(by_collective) == 1
    row = by_collective[0]
    assert row["exposed_wait_us_per_step"] == 40.0  # (80 + 0) / 2 rank windows
    # the slowest rank's step is rank 0's ([0, 110) against rank 1's [0, 110): tie, lowest rank)
    assert (row["slowest_rank_exposed_wait_us"], row["slowest_rank_exposed_transfer_us"]) == (80.0, 20.0)


def test_a_kernel_queued_before_the_gap_is_device_wait():
    # gemm [0,20); the next kernel was launched at 5 (already queued) but starts at 50:
    # the gap [20,50) is all device wait
    con = raw_db(
        events=[
            ev("runtime", "cudaLaunchKernel", 0, 1, correlation=1),
            ev("runtime", "cudaLaunchKernel", 5, 1, correlation=2),
            kernel("gemm", 0, 20, launch_us=0, correlation=1),
            kernel("gemm", 50, 10, launch_us=5, correlation=2),
        ],
        steps=[step(1, 0, 10)],
    )
    assert idle(con) == [
        {
            "rank": 0,
            "step": 1,
            "idle_us": 30.0,
            "idle_host_wait_us": 0.0,
            "idle_device_wait_us": 30.0,
            "idle_unknown_us": 0.0,
        }
    ]


def test_a_host_that_launches_late_is_host_wait_then_launch_latency():
    # gemm [0,20); the host launches the next at 40, it starts at 45: [20,40) host, [40,45) device;
    # a kernel whose launch is not in the trace starts at 70 after the gap [55,70): unknown; the
    # last, launched at 42, starts at 80 after [75,80): device
    con = raw_db(
        events=[
            ev("runtime", "cudaLaunchKernel", 0, 1, correlation=1),
            ev("runtime", "cudaLaunchKernel", 40, 1, correlation=2),
            ev("runtime", "cudaLaunchKernel", 42, 1, correlation=3),
            kernel("gemm", 0, 20, launch_us=0, correlation=1),
            kernel("gemm", 45, 10, launch_us=40, correlation=2),
            kernel("gemm", 70, 5),
            kernel("gemm", 80, 5, launch_us=42, correlation=3),
        ],
        steps=[step(1, 0, 50)],
    )
    assert idle(con) == [
        {
            "rank": 0,
            "step": 1,
            "idle_us": 45.0,
            "idle_host_wait_us": 20.0,
            "idle_device_wait_us": 10.0,
            "idle_unknown_us": 15.0,
        }
    ]


def test_cpu_pipeline_send_and_recv_on_the_main_thread():
    # main thread: ProfilerStep [0,100), compute aten::mm [0,30) and [60,80); gloo:send [30,50),
    # gloo:recv [40,70) inside a `Backward 0` annotation, both on the main thread.
    # exposed = [30,60) = 30: send [30,40) + half of [40,50) = 15; recv the other half + [50,60) = 15
    main = {"pid": "1", "tid": "1"}
    con = raw_db(
        events=[
            ev("cpu_op", "aten::mm", 0, 30, **main),
            ev("cpu_op", "aten::mm", 60, 20, **main),
            ev("user_annotation", "gloo:send", 30, 20, **main),
            ev("user_annotation", "Backward 0", 38, 40, **main),
            ev("user_annotation", "gloo:recv", 40, 30, **main),
        ],
        steps=[step(1, 0, 100, **main)],
        collectives=[
            call("gloo:send", 30, 20, seq=0, op="send", source="gloo", tid="1"),
            call("gloo:recv", 40, 30, seq=1, op="recv", source="gloo", tid="1"),
        ],
        manifests=[{"strategy": "pp", "pp": 2, "world_size": 2}],
    )
    got = exposure(con)
    assert [(r["op"], r["phase"], r["parallel_dim"], r["exposed_us"]) for r in got] == [
        ("send", "forward", "pp", 15.0),
        ("recv", "backward", "pp", 15.0),
    ]
    assert rows(con, "SELECT exposed_comm_us FROM step_breakdown") == [{"exposed_comm_us": 30.0}]
    assert idle(con)[0]["idle_host_wait_us"] is None  # CPU traces have no idle causes


def test_parallel_dimension_from_the_mesh_description_or_the_layout():
    # fsdp x tp layout (dp 2, tp 2): mesh_tp / mesh_dp name their dimension; a group of 2 ranks
    # with no mesh name matches two degrees (unknown); default_pg is the world
    descs = [
        ("mesh_tp", 2, "tp"),
        ("mesh_dp_shard", 2, "dp"),
        ("undefined", 2, "unknown"),
        ("default_pg", 4, "world"),
    ]
    events, collectives = [], []
    for i, (desc, size, _) in enumerate(descs):
        events += [
            ev("runtime", "cudaLaunchKernel", i, 1, correlation=i + 1),
            kernel(COMM, 10 * i, 5, launch_us=i, correlation=i + 1),
        ]
        collectives.append(call(COMM, 10 * i, 5, seq=i, pg_desc=desc, group_size=size, process_group=str(i)))
    con = raw_db(
        events=events,
        steps=[step(1, 0, 50)],
        collectives=collectives,
        manifests=[{"strategy": "fsdp_tp", "dp": 2, "tp": 2, "world_size": 4}],
    )
    assert [r["parallel_dim"] for r in exposure(con)] == [want for *_, want in descs]


def test_the_sql_spells_the_label_prefix_and_comm_spans_as_the_vocabulary_does():
    text = (Path(sql_init).parent / "materialized" / "comm_intervals.sql").read_text()
    assert f"starts_with(name, '{LABEL_START}')" in text
    assert COMM_SPAN_PREFIXES == ("gloo:",) and "OR starts_with(name, 'gloo:')" in text


# --- brute-force oracle ------------------------------------------------------------------------


def oracle_share(intervals, compute, lo, hi, split=None) -> tuple[Fraction, Fraction]:
    """(exposed, exposed before split) of the interval clipped to [lo, hi), instant by instant."""
    exposed = before = Fraction(0)
    for t in range(lo, hi):
        if any(a <= t < b for a, b in compute):
            continue
        k = sum(1 for a, b in intervals if a <= t < b)
        exposed += Fraction(1, k)
        if split is not None and t < split:
            before += Fraction(1, k)
    return exposed, before


@st.composite
def generated(draw):
    """Two ranks of small GPU (or CPU) traces sharing a sequence of collectives."""
    cpu = draw(st.booleans())
    n_comm = draw(st.integers(1, 4))
    ranks = []
    for _ in range(2):
        compute = draw(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 15)), max_size=5))
        if cpu:  # main-thread cpu_ops must not overlap to be plain compute: keep them disjoint
            compute = [
                (a, d)
                for i, (a, d) in enumerate(sorted(compute))
                if all(a >= b0 + d0 for b0, d0 in sorted(compute)[:i])
            ]
        comm = draw(
            st.lists(st.tuples(st.integers(0, 60), st.integers(1, 20)), min_size=n_comm, max_size=n_comm)
        )
        ranks.append((compute, comm))
    steps = draw(st.lists(st.integers(1, 69), min_size=0, max_size=2, unique=True))
    return cpu, ranks, sorted(steps)


def build(cpu, ranks, cuts):
    events, steps, collectives = [], [], []
    bounds = [0, *cuts, 80]
    for rank, (compute, comm) in enumerate(ranks):
        main = {"pid": "1", "tid": "1", "rank": rank}
        for n, (a, b) in enumerate(pairwise(bounds)):
            steps.append(step(n + 1, a / US, (b - a) / US, **main))
        for i, (a, d) in enumerate(compute):
            if cpu:
                events.append(ev("cpu_op", "aten::mm", a / US, d / US, **main))
            else:
                events += [
                    ev("runtime", "cudaLaunchKernel", a / US, 0, correlation=100 + i, **main),
                    kernel("gemm", a / US, d / US, launch_us=a / US, correlation=100 + i, rank=rank),
                ]
        for i, (a, d) in enumerate(comm):
            name = f"gloo:all_reduce_{i}" if cpu else f"nccl_{i}"
            if cpu:
                events.append(
                    ev("user_annotation", name, a / US, d / US, pid="1", tid=str(900 + i), rank=rank)
                )
            else:
                events += [
                    ev("runtime", "cudaLaunchKernel", a / US, 0, correlation=i + 1, **main),
                    kernel(
                        name, a / US, d / US, stream=20 + i, launch_us=a / US, correlation=i + 1, rank=rank
                    ),
                ]
            src = {"source": "gloo", "tid": str(900 + i)} if cpu else {}
            collectives.append(call(name, a / US, d / US, seq=i, rank=rank, **src))
    return raw_db(events=events, steps=steps, collectives=collectives)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated())
def test_exposed_shares_agree_with_an_instant_by_instant_oracle(case):
    cpu, ranks, cuts = case
    con = build(cpu, ranks, cuts)
    got = rows(
        con,
        "SELECT e.rank, e.window_no, c.name, c.start_ns, c.end_ns, c.transfer_ns, e.lo_ns, e.hi_ns, "
        "e.exposed_ns, e.exposed_wait_ns FROM comm_window_exposure e "
        "JOIN comm_intervals c USING (study, run_id, rank, interval_no)",
    )
    windows = rows(con, "SELECT rank, window_no, exposed_comm_ns FROM window_breakdown WHERE scope = 'step'")
    for rank, (compute, comm) in enumerate(ranks):
        intervals = [(a, a + d) for a, d in comm]
        other = [(a, a + d) for a, d in ranks[1 - rank][1]]
        busy = [(a, a + d) for a, d in compute]
        for w in (w for w in windows if w["rank"] == rank):
            mine = [g for g in got if g["rank"] == rank and g["window_no"] == w["window_no"]]
            assert sum(g["exposed_ns"] for g in mine) == w["exposed_comm_ns"]  # exact, in integer ns
            exact = []
            for g in mine:
                i = int(g["name"].rsplit("_", 1)[1])
                transfer = min(intervals[i][1] - intervals[i][0], other[i][1] - other[i][0])
                assert g["transfer_ns"] == transfer
                e, before = oracle_share(intervals, busy, g["lo_ns"], g["hi_ns"], intervals[i][1] - transfer)
                assert g["exposed_ns"] in (floor(e), -floor(-e))  # within 1 ns of the exact share
                assert g["exposed_wait_ns"] == min(g["exposed_ns"], floor(before + Fraction(1, 2)))
                exact.append((e - floor(e), g["exposed_ns"] - floor(e)))
            # largest remainder: an interval rounded up never has a smaller remainder than one rounded down
            ups = [r for r, up in exact if up]
            downs = [r for r, up in exact if not up]
            assert not ups or not downs or min(ups) >= max(downs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, 60), st.integers(0, 12), st.one_of(st.none(), st.integers(0, 70))),
        min_size=1,
        max_size=7,
    ),
    st.lists(st.integers(1, 60), max_size=2, unique=True),
)
def test_idle_causes_agree_with_an_instant_by_instant_oracle(kernels, cuts):
    # each kernel (start, dur, launch or None); ProfilerSteps tile [0, 80) at the cuts
    events = []
    for i, (a, d, launch) in enumerate(kernels):
        if launch is not None:
            events.append(ev("runtime", "cudaLaunchKernel", launch / US, 0, correlation=i + 1))
        events.append(
            kernel(
                f"k{i}",
                a / US,
                d / US,
                launch_us=None if launch is None else launch / US,
                correlation=i + 1,
                stream=7 + i % 2,
            )
        )
    bounds = [0, *sorted(cuts), 80]
    con = raw_db(
        events=events,
        steps=[step(n + 1, a / US, (b - a) / US) for n, (a, b) in enumerate(pairwise(bounds))],
    )
    windows = rows(
        con,
        "SELECT b.start_ns, b.start_ns + b.window_ns AS end_ns, b.idle_ns, c.idle_host_wait_ns AS host, "
        "c.idle_device_wait_ns AS device, c.idle_unknown_ns AS unknown FROM window_breakdown b "
        "JOIN window_idle_causes c USING (study, run_id, rank, window_no) WHERE b.scope = 'step'",
    )
    spans = [(a, a + d, launch) for a, d, launch in kernels]
    for w in windows:
        host = device = unknown = 0
        for t in range(w["start_ns"], w["end_ns"]):
            if any(a <= t < b for a, b, _ in spans):
                continue
            b = min(a for a, _, _ in spans if a > t)  # the work the gap waits for starts at b
            launches = [launch for a, _, launch in spans if a == b and launch is not None]
            if not launches:
                unknown += 1
            elif t < min(launches):
                host += 1  # not yet asked for
            else:
                device += 1
        assert (w["host"], w["device"], w["unknown"]) == (host, device, unknown)
        assert host + device + unknown == w["idle_ns"]


# --- every real trace --------------------------------------------------------------------------

EXACT_SQL = """
SELECT
    count(*) AS windows,
    count(*) FILTER (WHERE b.exposed_comm_ns > 0) AS with_exposed,
    count(*) FILTER (WHERE b.rule = 'gpu' AND b.idle_ns > 0) AS with_idle,
    count(*) FILTER (WHERE b.exposed_comm_ns <> coalesce(e.exposed_ns, 0)) AS exposed_off,
    count(*) FILTER (WHERE b.rule = 'gpu' AND b.idle_ns IS DISTINCT FROM
        c.idle_host_wait_ns + c.idle_device_wait_ns + c.idle_unknown_ns) AS idle_off,
    count(*) FILTER (WHERE b.rule = 'cpu' AND c.window_no IS NOT NULL) AS cpu_with_causes
FROM window_breakdown AS b
LEFT JOIN (
    SELECT study, run_id, rank, window_no, sum(exposed_ns) AS exposed_ns
    FROM comm_window_exposure GROUP BY ALL
) AS e USING (study, run_id, rank, window_no)
LEFT JOIN window_idle_causes AS c USING (study, run_id, rank, window_no)
WHERE b.scope = 'step'
"""


def assert_exact(con, *, want_idle: bool) -> None:
    got = rows(con, EXACT_SQL)[0]
    assert got["with_exposed"] > 0, got  # the sums below are not vacuous
    assert not want_idle or got["with_idle"] > 0, got
    assert (got["exposed_off"], got["idle_off"], got["cpu_with_causes"]) == (0, 0, 0), got


@pytest.mark.slow
@pytest.mark.shared_data
def test_every_real_trace_sums_exactly(shared_data):
    from support.analysis_rawdb import parsed_db
    from tracehouse.pipeline.parsers.kineto.parse import parse_trace

    traces = sorted((shared_data / "traces").rglob("*.json.gz"))
    parsed = [
        (parse_trace(p), {"study": "real", "run_id": str(p.relative_to(shared_data)), "rank": 0})
        for p in traces
    ]
    assert_exact(parsed_db(parsed), want_idle=True)


@pytest.mark.slow
def test_the_sample_study_sums_exactly(sample_warehouse):
    from tracehouse.pipeline.warehouse import database

    con = database.open_for_query(sample_warehouse)
    assert_exact(con, want_idle=False)
    # every interval of a collected run knows its op, group, dimension and phase
    missing = rows(
        con,
        "SELECT count(*) AS n FROM comm_exposure WHERE op IS NULL OR process_group IS NULL "
        "OR parallel_dim = 'unknown' OR phase IS NULL OR exposed_wait_us IS NULL",
    )
    assert missing == [{"n": 0}]
