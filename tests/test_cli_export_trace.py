"""`tracehouse export-trace`: one Chrome trace JSON of a run's steps, all ranks, clocks aligned, overlays.

On the sample study (CPU ranks, one host: offsets 0) the file holds exactly the events overlapping
each rank's ProfilerStep span, and its overlay tracks are the comm_exposure and idle_causes rows
of the step. On the hand-made study, host hB runs 5 µs ahead of hA (clock_offsets), so rank 1's
gemm at 110 µs lands at 105 µs on the reference clock.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from support.analysis_marts_fixture import study_db
from support.analysis_rawdb import rows
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.export_trace import CRITICAL_LANE, EXPOSED_LANE, IDLE_LANE, export_trace
from tracehouse.pipeline.warehouse.database import open_for_query

RUN, STEP = "ddp-ws4", 3


def lanes(document: dict) -> dict[tuple[int, int], str]:
    """(pid, tid) -> thread name, from the metadata events."""
    return {
        (e["pid"], e["tid"]): e["args"]["name"] for e in document["traceEvents"] if e["name"] == "thread_name"
    }


def spans(document: dict, lane: str | None = None) -> list[dict]:
    """The complete events, on one lane or on the ranks' own threads and streams."""
    names = lanes(document)
    overlay = {EXPOSED_LANE, IDLE_LANE, CRITICAL_LANE}
    return [
        e
        for e in document["traceEvents"]
        if e["ph"] == "X"
        and (names[e["pid"], e["tid"]] == lane if lane else names[e["pid"], e["tid"]] not in overlay)
    ]


def unix_ns(document: dict, event: dict) -> int:
    """An exported event's start back in ns since the epoch (reference host's clock)."""
    return round(event["ts"] * 1000) + document["otherData"]["base_unix_ns"]


@pytest.fixture(scope="module")
def exported(sample_warehouse, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("export") / "merged.json"
    code = main(
        ["export-trace", RUN, "--step", str(STEP), "--warehouse", str(sample_warehouse), "-o", str(out)]
    )
    assert code == 0
    return json.loads(out.read_text())


def test_is_chrome_trace_json(exported):
    events = exported["traceEvents"]
    assert events and {e["ph"] for e in events} == {"X", "M"}
    for e in events:
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int) and isinstance(e["name"], str)
        if e["ph"] == "X":
            assert isinstance(e["ts"], float) and e["ts"] >= 0 and e["dur"] >= 0
        else:
            assert e["name"] in {"process_name", "process_sort_index", "thread_name"}
    assert {e["args"]["name"] for e in events if e["name"] == "process_name"} == {
        f"rank {r} (vm)" for r in range(4)
    }
    # the sample warehouse is not projected: no stored path, and the file says why
    [note] = [n for n in exported["otherData"]["notes"] if "critical-path track" in n]
    assert "not computed yet" in note and not spans(exported, CRITICAL_LANE)


def test_every_event_of_the_step_on_every_rank(exported, sample_warehouse):
    with open_for_query(sample_warehouse) as con:
        want = rows(
            con,
            "SELECT e.rank, e.name, e.ts_unix_ns, e.dur_ns FROM events AS e JOIN steps AS s "
            "ON e.study = s.study AND e.run_id = s.run_id AND e.rank = s.rank "
            f"WHERE e.run_id = '{RUN}' AND s.step = {STEP} AND e.dur_ns >= 0 "
            "AND e.ts_unix_ns < s.ts_unix_ns + s.dur_ns AND e.ts_unix_ns + e.dur_ns >= s.ts_unix_ns",
        )
        offsets = rows(con, f"SELECT offset_us FROM clock_offsets WHERE run_id = '{RUN}'")
    assert offsets == [{"offset_us": 0.0}]  # one host: times are the ranks' own
    got = Counter(
        (e["pid"], e["name"], unix_ns(exported, e), round(e["dur"] * 1000)) for e in spans(exported)
    )
    assert got == Counter((r["rank"], r["name"], r["ts_unix_ns"], r["dur_ns"]) for r in want)
    assert {r["rank"] for r in want} == {0, 1, 2, 3}
    assert all(e["args"]["unix_ns"] == unix_ns(exported, e) for e in spans(exported))


def test_overlay_tracks_are_the_views_rows(exported, sample_warehouse):
    with open_for_query(sample_warehouse) as con:
        exposed = rows(
            con,
            "SELECT rank, start_unix_ns, exposed_us FROM comm_exposure "
            f"WHERE run_id = '{RUN}' AND step = {STEP} AND exposed_us > 0",
        )
        idle = rows(
            con,
            "SELECT rank, window_start_unix_ns, idle_us FROM idle_causes "
            f"WHERE run_id = '{RUN}' AND step = {STEP}",
        )
    assert exposed and len(idle) == 4
    got_exposed = [
        (e["pid"], unix_ns(exported, e), e["args"]["exposed_us"]) for e in spans(exported, EXPOSED_LANE)
    ]
    assert sorted(got_exposed) == sorted((r["rank"], r["start_unix_ns"], r["exposed_us"]) for r in exposed)
    got_idle = [(e["pid"], unix_ns(exported, e), e["args"]["idle_us"]) for e in spans(exported, IDLE_LANE)]
    assert sorted(got_idle) == sorted((r["rank"], r["window_start_unix_ns"], r["idle_us"]) for r in idle)


def test_clock_offsets_shift_each_host(tmp_path):
    out = tmp_path / "r2.json"
    result = export_trace(study_db(), "r2", [2], out)
    document = json.loads(out.read_text())
    assert document["otherData"]["clock_offsets_us"] == {"0": 0.0, "1": 5.0}
    gemms = {e["pid"]: e for e in spans(document) if e["name"] == "gemm"}
    # both gemms start at 110 µs on their own host's clock; hB (rank 1) runs 5 µs ahead
    assert (unix_ns(document, gemms[0]), unix_ns(document, gemms[1])) == (110_000, 105_000)
    assert gemms[1]["ts"] == 0.0 and gemms[0]["ts"] == 5.0
    assert (result.ranks, result.events, result.idle_windows) == ([0, 1], 2, 2)


def test_errors_are_one_line(sample_warehouse, tmp_path, capsys):
    wh = str(sample_warehouse)
    assert main(["export-trace", RUN, "--step", "99", "--warehouse", wh, "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no step 99" in err and "its steps: 2, 3, 4" in err
    missing = Path(tmp_path / "absent" / "x.json")
    assert main(["export-trace", RUN, "--step", "3", "--warehouse", wh, "-o", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "folder does not exist" in err and not missing.parent.exists()


def test_two_steps_hold_each_event_once(sample_warehouse, tmp_path):
    """An event overlapping both steps (a thread-long span) is exported once, duplicates in the trace kept."""
    out = tmp_path / "two.json"
    with open_for_query(sample_warehouse) as con:
        export_trace(con, RUN, [3, 2], out)
        want = rows(
            con,
            "SELECT e.rank, e.name, e.ts_unix_ns, e.dur_ns FROM events AS e "
            f"WHERE e.run_id = '{RUN}' AND e.dur_ns >= 0 AND EXISTS (SELECT 1 FROM steps AS s "
            "WHERE s.study = e.study AND s.run_id = e.run_id AND s.rank = e.rank AND s.step IN (2, 3) "
            "AND e.ts_unix_ns < s.ts_unix_ns + s.dur_ns AND e.ts_unix_ns + e.dur_ns >= s.ts_unix_ns)",
        )
    document = json.loads(out.read_text())
    got = Counter(
        (e["pid"], e["name"], unix_ns(document, e), round(e["dur"] * 1000)) for e in spans(document)
    )
    assert got == Counter((r["rank"], r["name"], r["ts_unix_ns"], r["dur_ns"]) for r in want)
    assert document["otherData"]["steps"] == [2, 3]
    assert {e["args"]["step"] for e in spans(document)} == {2, 3}


def test_the_critical_path_track_is_the_stored_path(sample_warehouse, tmp_path):
    """After `tracehouse project`, each segment of the step's path is a span on its rank's lane,
    at the path rank's window start plus its offset; the path rank's spans cover the step."""
    wh = tmp_path / "wh"
    shutil.copytree(sample_warehouse, wh)
    project = ["project", "--warehouse", str(wh), "--study", "tiny-cpu-gloo", "--run", RUN]
    assert main([*project, "--world-sizes", "4"]) == 0
    out = tmp_path / "path.json"
    with open_for_query(wh) as con:
        result = export_trace(con, RUN, [STEP], out)
        want = rows(
            con,
            "SELECT c.seq, c.rank, c.kind, c.start_us, c.dur_us, c.step_us, w.window_start_unix_ns "
            "FROM critical_path AS c JOIN idle_causes AS w ON w.study = c.study AND w.run_id = c.run_id "
            f"AND w.step = c.step AND w.rank = c.path_rank WHERE c.run_id = '{RUN}' AND c.step = {STEP}",
        )
    document = json.loads(out.read_text())
    got = spans(document, CRITICAL_LANE)
    assert want and result.critical_segments == len(want) == len(got)
    assert not [n for n in document["otherData"]["notes"] if "critical-path track" in n]
    by_seq = {e["args"]["seq"]: e for e in got}
    for r in want:
        e = by_seq[r["seq"]]
        assert (e["pid"], e["args"]["kind"]) == (r["rank"], r["kind"])
        assert unix_ns(document, e) == r["window_start_unix_ns"] + round(r["start_us"] * 1000)
        assert round(e["dur"] * 1000) == round(r["dur_us"] * 1000)
    assert sum(r["dur_us"] for r in want) == pytest.approx(want[0]["step_us"], abs=1e-3)
