"""The CPU (gloo) rule of step_breakdown and rank_summary on hand-made events, by hand."""

from __future__ import annotations

from support.analysis_rawdb import ev, raw_db, rows, step

COLS = "window_us, compute_us, comm_us, exposed_comm_us, overlapped_comm_us, other_us, idle_us"


def cpu_trace_events() -> list[dict]:
    """One step [0, 100) on the main thread (pid 1, tid 1), gloo threads on tid 2."""
    return [
        ev("user_annotation", "ProfilerStep#1", 0, 100),
        ev("cpu_op", "aten::linear", 10, 30),  # [10,40), self [10,15) + [35,40)
        ev("cpu_op", "aten::addmm", 15, 20),  # [15,35) nested
        ev("gloo:send", "gloo:send", 20, 10),  # [20,30) on the main thread, left out of the tree
        ev("user_annotation", "FSDP::all_gather", 40, 20),  # [40,60): self time is not compute
        ev("cpu_op", "aten::mul", 45, 5),  # [45,50) compute
        ev("cpu_op", "c10d::allreduce_", 60, 10),  # [60,70) a communication op: not compute
        ev("cpu_op", "aten::a", 80, 10),  # [80,90)
        ev("cpu_op", "record_param_comms", 85, 10),  # [85,95) overlaps a without nesting
        ev("cpu_op", "gloo:all_reduce", 55, 25, tid="2"),  # comm span on a gloo thread [55,80)
        ev("cpu_op", "gloo:all_reduce", 120, 10, tid="2"),  # outside the main thread's span
        ev("cpu_op", "aten::busy_on_other_thread", 0, 100, tid="3"),  # not the main thread
    ]


def test_cpu_step_breakdown_by_hand():
    con = raw_db(steps=[step(1, 0, 100)], events=cpu_trace_events())
    # compute = main-thread cpu_op self time: [10,40) (linear + addmm) 30, mul 5, and aten::a only
    #   on [80,85): from 85 record_param_comms started last, so it is the innermost event = 40
    # comm spans: [20,30) (main-thread gloo:send) + [55,80) = 35; [20,30) lies inside compute,
    #   so exposed = 25, overlapped = 10; other = 0; idle = 100 - 40 - 25 = 35
    got = rows(con, f"SELECT step, rule, {COLS} FROM step_breakdown")
    assert got == [
        {
            "step": 1,
            "rule": "cpu",
            "window_us": 100.0,
            "compute_us": 40.0,
            "comm_us": 35.0,
            "exposed_comm_us": 25.0,
            "overlapped_comm_us": 10.0,
            "other_us": 0.0,
            "idle_us": 35.0,
        }
    ]


def test_cpu_rank_summary_spans_the_main_thread():
    con = raw_db(steps=[step(1, 0, 100)], events=cpu_trace_events())
    # main thread first start 0 to last end 100; the gloo span at [120,130) lies outside it
    got = rows(
        con, "SELECT span_us, compute_us, comm_us, exposed_comm_us, idle_us, overlap_pct FROM rank_summary"
    )
    assert got == [
        {
            "span_us": 100.0,
            "compute_us": 40.0,
            "comm_us": 35.0,
            "exposed_comm_us": 25.0,
            "idle_us": 35.0,
            "overlap_pct": 100.0 * 10 / 35,
        }
    ]


def test_cpu_innermost_is_the_latest_started_event():
    events = [
        ev("user_annotation", "ProfilerStep#3", 0, 50),
        ev("user_annotation", "Forward 0", 0, 30),  # annotation: its self time is not compute
        ev("cpu_op", "aten::x", 10, 30),  # [10,40) starts inside Forward 0, ends after it
        ev("user_annotation", "Backward 0", 20, 25),  # [20,45) started last from 20 on
    ]
    con = raw_db(steps=[step(3, 0, 50)], events=events)
    # innermost: [0,10) Forward 0, [10,20) aten::x, [20,45) Backward 0, [45,50) the step: compute 10
    got = rows(con, "SELECT compute_us, idle_us FROM step_breakdown")
    assert got == [{"compute_us": 10.0, "idle_us": 40.0}]


def test_cpu_same_start_ties_go_to_the_shorter_event():
    events = [
        ev("user_annotation", "ProfilerStep#1", 0, 40),
        ev("user_annotation", "wrapper", 0, 40),  # same start and end as the step
        ev("cpu_op", "aten::add", 0, 10),  # same start, ends first: innermost on [0,10)
        ev("cpu_op", "aten::copy_", 20, 20),  # same end as the wrapper, starts later
    ]
    con = raw_db(steps=[step(1, 0, 40)], events=events)
    assert rows(con, "SELECT compute_us FROM step_breakdown") == [{"compute_us": 30.0}]


def test_cpu_ranks_without_profiler_step_have_no_rows():
    con = raw_db(events=[ev("cpu_op", "aten::add", 0, 10)])
    # decision: the CPU rule needs a main thread, which only ProfilerStep# identifies
    assert rows(con, "SELECT count(*) AS n FROM step_breakdown") == [{"n": 0}]
    assert rows(con, "SELECT count(*) AS n FROM rank_summary") == [{"n": 0}]


def test_world_size_one_cpu_trace_has_no_communication():
    events = [ev("user_annotation", "ProfilerStep#2", 0, 20), ev("cpu_op", "aten::mm", 2, 10)]
    con = raw_db(steps=[step(2, 0, 20)], events=events)
    got = rows(con, f"SELECT {COLS} FROM step_breakdown")
    assert got == [
        {
            "window_us": 20.0,
            "compute_us": 10.0,
            "comm_us": 0.0,
            "exposed_comm_us": 0.0,
            "overlapped_comm_us": 0.0,
            "other_us": 0.0,
            "idle_us": 10.0,
        }
    ]
