"""memory_timeline and step_memory: by hand, against the parsed [memory] events, and stated absence.

Hand-made study (support.analysis_marts_fixture), run r2, rank 0 on GPU 0, steps [0, 100) and
[100, 200) µs; events (µs: change -> allocated, reserved): 5: +100 -> 100, 200; 50: +300 -> 400,
512; 90: -300 -> 100, 512; 150: +50 -> 150, 512; 250: -150 -> 0, 512 (after the last step).
Step 1: 3 events, nothing before it, peak allocated 400, reserved 512. Step 2: starts at 100
(after the event at 90), one event to 150: peak 150. Rank 1 has no memory events.
"""

from __future__ import annotations

import polars as pl
import pytest
from support.analysis_marts_fixture import study_db
from support.analysis_rawdb import parsed_db, rows
from support.testdata import shared_path
from tracehouse.pipeline.parsers.kineto.parse import parse_trace


@pytest.fixture(scope="module")
def con():
    return study_db()


def test_timeline_by_hand(con):
    got = rows(
        con,
        "SELECT device_kind, step, bytes, net_bytes, allocated_bytes, reserved_bytes FROM memory_timeline "
        "WHERE run_id = 'r2' ORDER BY ts_unix_ns",
    )
    assert [tuple(r.values()) for r in got] == [
        ("gpu", 1, 100, 100, 100, 200),
        ("gpu", 1, 300, 400, 400, 512),
        ("gpu", 1, -300, 100, 100, 512),
        ("gpu", 2, 50, 150, 150, 512),
        ("gpu", None, -150, 0, 0, 512),
    ]


def test_step_peaks_by_hand_and_absence_stated(con):
    got = rows(
        con,
        "SELECT rank, step, device_kind, memory_events, start_allocated_bytes, peak_allocated_bytes, "
        "peak_reserved_bytes, peak_net_bytes FROM step_memory WHERE run_id = 'r2' ORDER BY rank, step",
    )
    assert [tuple(r.values()) for r in got] == [
        (0, 1, "gpu", 3, None, 400, 512, 400),
        (0, 2, "gpu", 1, 100, 150, 512, 150),
        # rank 1 was profiled without memory events: its steps are there, saying so
        (1, 1, None, 0, None, None, None, None),
        (1, 2, None, 0, None, None, None, None),
    ]


def oracle_peaks(parsed) -> dict[tuple[int, str, int], int]:
    """Per (step, device type, device): the most allocated bytes at any instant of the host step."""
    memory = parsed.memory_events.sort("ts_unix_ns")
    out = {}
    for s in parsed.steps.iter_rows(named=True):
        start, end = s["ts_unix_ns"], s["ts_unix_ns"] + s["dur_ns"]
        for (dtype, device), events in memory.group_by(["device_type", "device"]):
            before = events.filter(pl.col("ts_unix_ns") < start)
            inside = events.filter((pl.col("ts_unix_ns") >= start) & (pl.col("ts_unix_ns") < end))
            levels = inside["total_allocated"].to_list()
            if before.height:  # the level the step starts with: after the last event before it
                levels.append(before["total_allocated"][-1])
            if levels:
                out[s["step"], dtype, device] = max(levels)
    return out


@pytest.mark.shared_data
def test_step_peaks_equal_the_parsed_events_on_a_real_trace():
    # an H100 BERT step profiled with profile_memory: GPU 0 and CPU allocations with Kineto's totals
    parsed = parse_trace(shared_path("traces/tracelens/h100_bert_small.json.gz"))
    db = parsed_db([(parsed, {"study": "s", "run_id": "bert", "rank": 0})])
    got = rows(
        db,
        "SELECT step, device_kind, device, memory_events, peak_allocated_bytes FROM step_memory ORDER BY ALL",
    )
    want = oracle_peaks(parsed)
    assert {
        (r["step"], 0 if r["device_kind"] == "cpu" else 1, r["device"]): r["peak_allocated_bytes"]
        for r in got
    } == want
    assert rows(db, "SELECT count(*) AS n FROM memory_timeline") == [{"n": parsed.memory_events.height}]
    assert {r["device_kind"] for r in got} == {"cpu", "gpu"}


@pytest.mark.shared_data
def test_net_bytes_where_the_trace_has_no_totals():
    # 2021 traces predate Kineto's Total Allocated: net_bytes still gives the level, from 0
    parsed = parse_trace(shared_path("traces/kineto/resnet50_v100_2021.pt.trace.json.gz"))
    db = parsed_db([(parsed, {"study": "s", "run_id": "resnet", "rank": 0})])
    (got,) = rows(
        db,
        "SELECT count(*) AS n, count(allocated_bytes) AS with_totals, "
        "max(net_bytes) FILTER (device_kind = 'gpu') AS gpu_peak_net FROM memory_timeline",
    )
    gpu = parsed.memory_events.filter(pl.col("device_type") == 1).sort("ts_unix_ns")
    running = gpu.group_by("ts_unix_ns", maintain_order=True).agg(pl.col("bytes").sum())["bytes"].cum_sum()
    assert got == {"n": parsed.memory_events.height, "with_totals": 0, "gpu_peak_net": running.max()}


def test_sample_study_ranks_say_they_have_no_memory_events(sample_warehouse):
    from tracehouse.pipeline.warehouse.database import open_for_query

    with open_for_query(sample_warehouse) as db:
        coverage = rows(db, "SELECT DISTINCT has_memory, op_gaps FROM trace_coverage")
        steps = rows(
            db,
            "SELECT count(*) AS n, count(device_kind) AS devices, sum(memory_events) AS ev FROM step_memory",
        )
        ranks_steps = rows(
            db, "SELECT count(*) AS n FROM (SELECT DISTINCT study, run_id, rank, step FROM steps)"
        )
    assert [c["has_memory"] for c in coverage] == [False]
    assert all("no memory events" in c["op_gaps"] for c in coverage)
    assert steps == [{"n": ranks_steps[0]["n"], "devices": 0, "ev": 0}]
