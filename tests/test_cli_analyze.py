"""`tracehouse analyze` takes the same ways of choosing what to ingest as `tracehouse ingest`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from support.testdata import SAMPLE_TRACES
from tracehouse.pipeline.cli.main import main

RANK0 = SAMPLE_TRACES / "tiny-cpu-gloo" / "ddp-ws1" / "rank0.pt.trace.json.gz"


def trace_without_rank(folder: Path) -> Path:
    """A real CPU trace with its distributedInfo removed, alone in a folder without a manifest."""
    doc = json.loads(gzip.decompress(RANK0.read_bytes()))
    del doc["distributedInfo"]
    folder.mkdir()
    path = folder / "worker.json"
    path.write_text(json.dumps(doc))
    return path


def test_analyze_of_a_trace_without_a_rank_reports_it_as_a_run_of_its_own(tmp_path, capsys) -> None:
    trace = trace_without_rank(tmp_path / "traces")
    assert main(["analyze", str(trace.parent), "-o", str(tmp_path / "r.html"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["ingest"]
    assert (summary["loaded"], summary["failed"], summary["runs"]) == (1, [], ["default/worker"])


def test_analyze_with_rank_study_and_run_reports_the_trace(tmp_path, capsys) -> None:
    trace = trace_without_rank(tmp_path / "traces")
    out = tmp_path / "r.html"
    options = ["--rank", f"{trace.name}=0", "--study", "mine", "--run", "solo", "--json"]
    assert main(["analyze", str(trace.parent), *options, "-o", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)  # with --json, stdout is only the JSON
    assert summary["ingest"]["loaded"] == 1 and summary["ingest"]["failed"] == []
    # breakdown and its shares, what the step waits for (idle by cause), its ops on the roofline (no
    # critical path before `project`), per-rank step time, top kernels
    assert summary["report"] == {"html": str(out), "study": "mine", "charts": 6, "pngs": []}
    assert out.stat().st_size > 0


def test_analyze_with_a_bad_rank_option_is_one_line(tmp_path, capsys) -> None:
    code = main(["analyze", str(tmp_path), "--rank", "worker.json", "-o", str(tmp_path / "r.html")])
    assert code == 2
    assert capsys.readouterr().err == (
        "tracehouse analyze: error: --rank 'worker.json': expected FILE=N with N a non-negative integer\n"
    )
