"""The GPU rule of step_breakdown and rank_summary on hand-made events, every number by hand."""

from __future__ import annotations

import pytest
from support.analysis_rawdb import ev, kernel, raw_db, refresh, rows, step

BREAKDOWN = (
    "window_us",
    "compute_us",
    "comm_us",
    "exposed_comm_us",
    "overlapped_comm_us",
    "other_us",
    "idle_us",
)


def breakdown(con, view: str = "step_breakdown") -> list[tuple]:
    """(step, window_start_us, window, compute, comm, exposed, overlapped, other, idle) rows."""
    order = "step" if view == "step_breakdown" else "rank"
    cols = ", ".join(BREAKDOWN)
    first = (
        "step, window_start_unix_ns / 1000.0"
        if view == "step_breakdown"
        else "rank, span_start_unix_ns / 1000.0"
    )
    cols = cols.replace("window_us", "span_us") if view == "rank_summary" else cols
    return [tuple(r.values()) for r in rows(con, f"SELECT {first}, {cols} FROM {view} ORDER BY {order}")]


def test_two_streams_comm_partly_hidden_memcpy_in_gap():
    con = raw_db(
        steps=[step(1, 0, 100)],
        events=[
            kernel("gemm_a", 10, 20, stream=7, launch_us=1),  # compute [10,30)
            kernel("gemm_b", 20, 20, stream=8, launch_us=2),  # compute [20,40) overlaps a on another stream
            kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 35, 20, stream=9, launch_us=3),  # comm [35,55)
            ev("memcpy", "Memcpy DtoH", 60, 10, stream=7, launch_us=4),  # memory [60,70) in a gap
        ],
    )
    # window [10, 70): first start of step-1 events to the last end of its own events = 60
    # compute |[10,40)| = 30; comm 20, exposed |[40,55)| = 15, overlapped |[35,40)| = 5
    # other = memcpy outside compute and comm = 10; idle = [55,60) = 5; 30 + 15 + 10 + 5 = 60
    assert breakdown(con) == [(1, 10.0, 60.0, 30.0, 20.0, 15.0, 5.0, 10.0, 5.0)]
    # whole trace: the same span, and overlap % = 5 / 20
    summary = rows(con, "SELECT span_us, busy_us, idle_us, overlap_pct FROM rank_summary")
    assert summary == [{"span_us": 60.0, "busy_us": 55.0, "idle_us": 5.0, "overlap_pct": 25.0}]


def test_gpu_work_lagging_the_host_lands_by_launch_and_all_events_count():
    con = raw_db(
        steps=[step(1, 0, 100), step(2, 100, 100)],
        events=[
            kernel("k1", 150, 20, launch_us=10),  # step 1, runs while the host is in step 2
            kernel("k2", 200, 30, launch_us=20),  # step 1
            kernel("k5", 245, 10, launch_us=30, stream=8),  # step 1, but runs inside step 2's window
            kernel("k3", 240, 10, launch_us=100),  # launch exactly at step 2's start: step 2 (half-open)
            kernel("k4", 260, 40, launch_us=120),  # step 2
        ],
    )
    # step 1 = [150, 240): first step-1 start to the first step-2 start; compute 20 + 30 = 50, idle 40
    # step 2 = [240, 300): ends at the last end of its own events (k4: 300); compute counts every
    # event inside it, k5 included: |[240,255) ∪ [260,300)| = 15 + 40 = 55, idle 5
    assert breakdown(con) == [
        (1, 150.0, 90.0, 50.0, 0.0, 0.0, 0.0, 0.0, 40.0),
        (2, 240.0, 60.0, 55.0, 0.0, 0.0, 0.0, 0.0, 5.0),
    ]


def test_launch_at_step_end_is_outside_and_launchless_events_place_no_boundary():
    con = raw_db(
        steps=[step(1, 0, 100), step(2, 150, 100)],
        events=[
            kernel("before", 0, 20),  # launch not in the trace: counts, places nothing
            kernel("k1", 30, 20, launch_us=10),  # step 1 [30, 50)
            kernel("gap", 40, 30, launch_us=100),  # launched at step 1's end (excluded) before step 2
            kernel("ncclDevKernel_Generic", 75, 10),  # launch-less comm, inside step 2's window
            kernel("k2", 80, 10, launch_us=160),  # step 2 [80, 90)
            kernel("after", 95, 5),  # launch-less after the last step's own end: outside
        ],
    )
    # step 1 = [30, 80): compute |[30,50) ∪ [40,70)| = 40 (the unplaced "gap" kernel still counts);
    #   the launch-less comm kernel [75,85) counts clipped to [75,80): comm 5, exposed 5; idle [70,75) 5
    # step 2 = [80, 90): compute 10; the comm kernel clipped to [80,85): comm 5, all hidden
    assert breakdown(con) == [
        (1, 30.0, 50.0, 40.0, 5.0, 5.0, 0.0, 0.0, 5.0),
        (2, 80.0, 10.0, 10.0, 5.0, 0.0, 5.0, 0.0, 0.0),
    ]
    # whole trace [0, 100): compute |[0,20) ∪ [30,70) ∪ [80,90)| = 70, comm [75,85) = 10, of
    # which [75,80) exposed = 5; busy = 70 + 5 + [95,100) 5 = 80, idle 20
    assert breakdown(con, "rank_summary") == [(0, 0.0, 100.0, 75.0, 10.0, 5.0, 5.0, 0.0, 20.0)]


def test_trace_without_profiler_step_is_one_window_with_step_null():
    con = raw_db(events=[kernel("a", 5, 10, launch_us=1), kernel("b", 30, 10, launch_us=2)])
    # first to last GPU event: [5, 40) = 35, compute 20, idle 15
    assert breakdown(con) == [(None, 5.0, 35.0, 20.0, 0.0, 0.0, 0.0, 0.0, 15.0)]


def test_steps_without_any_placeable_gpu_event_fall_back_to_one_window():
    con = raw_db(steps=[step(1, 0, 10)], events=[kernel("a", 5, 10), kernel("b", 30, 10)])
    # decision (docs/methodology-decisions.md): no event can be placed in a step, so step NULL
    assert breakdown(con) == [(None, 5.0, 35.0, 20.0, 0.0, 0.0, 0.0, 0.0, 15.0)]


@pytest.mark.parametrize(
    ("kind", "name", "klass"),
    [
        ("kernel", "ncclKernel_AllGather_RING_LL_Sum_bf16", "comm"),
        ("kernel", "NCCLKERNEL_upper_case", "comm"),
        ("kernel", "rcclGenericKernel", "comm"),
        ("kernel", "hcclAllReduce", "comm"),
        ("kernel", "void at::ncclDevKernel_Generic(x)", "comm"),  # contains ncclDevKernel
        ("kernel", "my_ncclKernel_wrapper", "comm"),  # contains ncclKernel
        ("kernel", "void gemm_nccl_like_name", "compute"),  # 'nccl' inside, not a pattern
        ("memcpy", "ncclMemcpy", "memory"),  # category decides before the name
        ("memset", "Memset (Device)", "memory"),
        ("kernel", "deepep_dispatch_kernel", "comm"),  # user pattern below
    ],
)
def test_classes_by_category_then_name(kind, name, klass):
    con = raw_db(events=[ev(kind, name, 0, 10, stream=7, launch_us=None)])
    con.execute("INSERT INTO comm_kernel_patterns VALUES ('%DeepEP%', 'DeepEP kernels')")
    refresh(con)  # gpu_events is a table: a new pattern counts once it is refreshed
    assert rows(con, "SELECT class FROM gpu_events") == [{"class": klass}]


def test_cuda_sync_and_gpu_user_annotation_are_not_device_activity():
    con = raw_db(
        events=[
            kernel("gemm", 0, 10, launch_us=None),
            ev("cuda_sync", "Stream Sync", 10, 50, stream=7),
            ev("gpu_user_annotation", "## forward ##", 0, 100, stream=7),
            ev("cpu_op", "aten::mm", 0, 200, stream=7),  # a host op with a stream arg (b200 quirk)
        ]
    )
    # only the kernel is device activity: span 10, all compute
    assert breakdown(con, "rank_summary") == [(0, 0.0, 10.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0)]


def test_negative_duration_events_are_ignored():
    con = raw_db(events=[kernel("a", 0, 10), {**kernel("bad", 5, 10), "dur_ns": -5000}])
    assert breakdown(con, "rank_summary") == [(0, 0.0, 10.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0)]


def test_ranks_are_measured_separately():
    con = raw_db(
        events=[kernel("a", 0, 10, launch_us=None, rank=0), kernel("b", 100, 30, launch_us=None, rank=1)]
    )
    assert breakdown(con, "rank_summary") == [
        (0, 0.0, 10.0, 10.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        (1, 100.0, 30.0, 30.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    ]


def test_window_breakdown_of_several_ranks_and_runs():
    # the sweep sorts every rank on one axis: nothing may leak from one rank or run to the next,
    # even when their times overlap and their rank numbers repeat
    a0 = {"run_id": "a", "rank": 0}
    a1 = {"run_id": "a", "rank": 1}
    b0 = {"run_id": "b", "rank": 0}
    con = raw_db(
        steps=[step(1, 0, 100, **a0), step(2, 100, 100, **a0), step(1, 0, 100, **a1)],
        events=[
            ev("memcpy", "Memcpy HtoD", 5, 10, stream=7, **a0),  # launch-less, before any window
            kernel("gemm", 20, 30, launch_us=10, **a0),  # compute [20,50), step 1
            kernel("ncclKernel_AllReduce", 40, 40, launch_us=20, stream=8, **a0),  # comm [40,80), step 1
            kernel("gemm", 120, 30, launch_us=110, **a0),  # compute [120,150), step 2
            kernel("gemm", 60, 10, launch_us=50, **a1),  # compute [60,70), step 1
            kernel("gemm", 30, 10, **b0),  # no ProfilerStep in run b: one window [30,60)
            kernel("ncclKernel_AllReduce", 35, 25, stream=8, **b0),  # comm [35,60)
        ],
    )
    got = rows(
        con,
        "SELECT run_id, rank, scope, step, start_ns / 1000 AS start_us, window_ns / 1000 AS window_us, "
        "compute_ns / 1000 AS compute_us, exposed_comm_ns / 1000 AS exposed_us, "
        "overlapped_comm_ns / 1000 AS overlapped_us, other_ns / 1000 AS other_us, idle_ns / 1000 AS idle_us "
        "FROM window_breakdown ORDER BY run_id, rank, scope, start_ns",
    )
    cols = ("start_us", "window_us", "compute_us", "exposed_us", "overlapped_us", "other_us", "idle_us")
    table = [(r["run_id"], r["rank"], r["scope"], r["step"], *(r[c] for c in cols)) for r in got]
    assert table == [
        # a/0 step 1 = [20, 120) (step 2's work starts at 120): compute 30, comm [40,80) of which
        # [50,80) = 30 exposed and 10 overlapped; the memcpy lies outside; idle 100 - 60 = 40
        ("a", 0, "step", 1, 20.0, 100.0, 30.0, 30.0, 10.0, 0.0, 40.0),
        # a/0 step 2 = [120, 150): the last step ends at the last end of its own events
        ("a", 0, "step", 2, 120.0, 30.0, 30.0, 0.0, 0.0, 0.0, 0.0),
        # a/0 whole trace [5, 150): compute 60, exposed 30, other = the memcpy's 10,
        # idle = 145 - 100 busy = 45
        ("a", 0, "trace", None, 5.0, 145.0, 60.0, 30.0, 10.0, 10.0, 45.0),
        ("a", 1, "step", 1, 60.0, 10.0, 10.0, 0.0, 0.0, 0.0, 0.0),
        ("a", 1, "trace", None, 60.0, 10.0, 10.0, 0.0, 0.0, 0.0, 0.0),
        # b/0 [30, 60): compute 10, comm 25 of which [40,60) = 20 exposed and 5 overlapped
        ("b", 0, "step", None, 30.0, 30.0, 10.0, 20.0, 5.0, 0.0, 0.0),
        ("b", 0, "trace", None, 30.0, 30.0, 10.0, 20.0, 5.0, 0.0, 0.0),
    ]


def test_straggler_ties_go_to_the_lowest_rank():
    # ranks 1 and 2 both take 30 µs in step 1, rank 0 takes 10 µs: rank 1 is the straggler
    con = raw_db(
        steps=[step(1, 0, 100, rank=r) for r in (0, 1, 2)],
        events=[
            kernel("gemm", 0, 10, launch_us=1, rank=0),
            kernel("gemm", 0, 30, launch_us=1, rank=2),
            kernel("gemm", 0, 30, launch_us=1, rank=1),
        ],
    )
    got = rows(con, "SELECT slowest_rank, slowest_us, median_us FROM step_stragglers")
    assert got == [{"slowest_rank": 1, "slowest_us": 30.0, "median_us": 30.0}]
