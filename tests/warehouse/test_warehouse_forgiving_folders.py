"""A searched folder may hold JSON files that are not traces: they are skipped and named, exit 0.

A file named on the command line is always read as a trace, and so is `*.pt.trace.json*`.
"""

from __future__ import annotations

import gzip
import json

from support.wh_helpers import count, write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.discovery.sniff import SNIFF_BYTES, looks_like_trace
from tracehouse.pipeline.ingest.driver import ingest


def test_other_json_beside_traces_is_skipped_and_named(tmp_path, capsys):
    run = tmp_path / "run"
    write_trace(run / "rank0.json", rank=0)
    (run / "config.json").write_text(json.dumps({"lr": 3e-4, "layers": [1, 2]}))
    (run / "metrics.json.gz").write_bytes(gzip.compress(b'[{"step": 1, "loss": 2.5}]'))
    (run / "notes.json").write_text("not json at all")
    wh = tmp_path / "wh"
    assert main(["ingest", str(run), "--warehouse", str(wh), "--json"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    skipped = sorted(str(run / n) for n in ("config.json", "metrics.json.gz", "notes.json"))
    assert sorted(summary["not_traces"]) == skipped
    assert (summary["loaded"], summary["failed"]) == (1, [])
    assert "1 loaded, 0 skipped, 0 failed, 3 not a trace" in err
    assert (
        sorted(line.rsplit(" ", 1)[1] for line in err.splitlines() if "not a trace, skipped" in line)
        == skipped
    )
    assert count(wh, "traces") == 1 and count(wh, "ingest_errors") == 0


def test_a_named_file_that_is_not_a_trace_is_still_an_error(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"lr": 3e-4}))
    summary = ingest([config], tmp_path / "wh", run="r", ranks={str(config): 0})
    assert summary.not_traces == [] and [p for p, _ in summary.failed] == [str(config)]
    assert summary.exit_code == 1


def test_a_profiler_named_file_is_always_a_trace(tmp_path):
    bad = tmp_path / "run" / "rank0.pt.trace.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"schemaVersion": 1}))  # no traceEvents: the parser says why
    summary = ingest([tmp_path / "run"], tmp_path / "wh", ranks={str(bad): 0})
    assert summary.not_traces == [] and [p for p, _ in summary.failed] == [str(bad)]


def test_sniffing_reads_real_traces_as_traces(shared_data):
    traces = sorted((shared_data / "traces").rglob("*.json.gz"))
    assert traces and all(looks_like_trace(p) for p in traces)


def test_sniffing_decides_only_what_its_head_shows(tmp_path):
    def sniff(name: str, text: str) -> bool:
        (tmp_path / name).write_text(text)
        return looks_like_trace(tmp_path / name)

    assert sniff("a.json", '{"schemaVersion": 1, "traceEvents": []}')
    assert sniff("b.json", '  [{"name": "x", "ph": "X", "ts": 1}]')
    assert not sniff("c.json", '{"schemaVersion": 1}')
    assert not sniff("d.json", "[1, 2, 3]")
    assert not sniff("e.json", "42")
    # escaped keys or a head that ends before the key: left to the parser
    assert sniff("f.json", '{"trace\\u0045vents": []}')
    assert sniff("g.json", '{"deviceProperties": "' + "x" * SNIFF_BYTES + '", "traceEvents": []}')
    (tmp_path / "h.json.gz").write_bytes(b"\x1f\x8b not really gzip")
    assert looks_like_trace(tmp_path / "h.json.gz")  # corrupt: the parser names the problem


def test_a_fifo_named_on_the_command_line_is_not_a_regular_file(tmp_path):
    import os

    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    summary = ingest([fifo], tmp_path / "wh")
    assert summary.failed == [(str(fifo), "not a regular file")]
