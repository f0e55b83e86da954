"""An ingest's summary says where its time went: the driver's phases and CPU, and the runs it refreshed."""

from __future__ import annotations

import json

from support.testdata import sample_runs
from tracehouse import ingest
from tracehouse.pipeline.cli.main import main


def test_the_phases_fit_in_the_ingest_and_count_the_runs_refreshed(tmp_path, capsys):
    first, second = sample_runs()[:2]
    summary = ingest([first, second], tmp_path / "wh")
    phases = summary.phase_s
    assert set(phases) == {"discover", "catalog", "tasks", "register", "refresh"}
    assert all(v >= 0 for v in phases.values()) and phases["refresh"] > 0
    # register runs inside tasks and the final drain; the others follow one another
    outside = phases["discover"] + phases["catalog"] + phases["tasks"] + phases["refresh"]
    assert outside <= summary.seconds
    assert set(summary.driver_cpu_s) == {"register", "refresh"} and summary.driver_cpu_s["refresh"] > 0
    assert summary.runs_refreshed == 2
    again = ingest([first], tmp_path / "wh")  # nothing new: no run recomputed
    assert again.runs_refreshed == 0 and again.loaded == 0
    assert main(["ingest", str(first), "--warehouse", str(tmp_path / "wh2"), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["runs_refreshed"] == 1 and set(shown["phase_s"]) == set(phases)
