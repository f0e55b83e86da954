"""A bug of tracehouse while ingesting a file stops the ingest with one line; the file is not blamed."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import tracehouse.pipeline.ingest.tasks as ingest_tasks
import tracehouse.pipeline.parsers.kineto.parse as kineto
from support.wh_helpers import count, write_trace
from tracehouse.pipeline.cli.main import INTERNAL_ERROR, main
from tracehouse.pipeline.common.errors import IngestBugError
from tracehouse.pipeline.ingest.driver import ingest


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error" in line]


def break_parser_for(monkeypatch, broken: Path, exc: Exception) -> None:
    """Make the trace parser raise exc (as a bug of ours would) for one file."""
    real = kineto.parse_trace

    def parse_trace(path, **kwargs):
        if Path(path) == broken:
            raise exc
        return real(path, **kwargs)

    monkeypatch.setattr(kineto, "parse_trace", parse_trace)


def data_partitions(wh: Path) -> list[Path]:
    return [p for p in (wh / "parquet").rglob("*.parquet") if p.name != "_empty.parquet"]


@pytest.mark.parametrize(
    "exc",
    [
        TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'"),
        AttributeError("'NoneType' object has no attribute 'height'"),
        NameError("name 'frame' is not defined"),
        ImportError("cannot import name 'gone' from 'tracehouse.pipeline.parsers'"),
        AssertionError("rows out of order"),
    ],
)
def test_a_bug_stops_the_ingest_with_one_line_and_blames_no_file(tmp_path, capsys, monkeypatch, exc):
    write_trace(tmp_path / "run" / "a.json", rank=0)
    bug = write_trace(tmp_path / "run" / "b.json", rank=1, n_kernels=2)
    write_trace(tmp_path / "run" / "c.json", rank=2, n_kernels=4)
    break_parser_for(monkeypatch, bug, exc)
    wh = tmp_path / "wh"
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(wh)]) == INTERNAL_ERROR
    lines = error_lines(capsys.readouterr().err)
    assert len(lines) == 1, lines
    expected = f"tracehouse ingest: internal error: {bug}: tracehouse bug while ingesting this file"
    assert lines[0].startswith(expected)
    assert f"{type(exc).__name__}: {exc}" in lines[0]
    assert count(wh, "ingest_errors") == 0
    # Nothing half-registered: a, whose rank could still be claimed by b or c, was rolled back.
    assert count(wh, "traces") == 0 and count(wh, "parquet_files") == 0

    monkeypatch.undo()  # tracehouse fixed: everything loads
    summary = ingest([tmp_path / "run"], wh)
    assert (summary.loaded, summary.skipped, summary.failed) == (3, 0, [])


def test_a_bug_after_the_writes_leaves_no_parquet(tmp_path, capsys, monkeypatch):
    write_trace(tmp_path / "run" / "a.json", rank=0)

    def broken_row(*args):
        raise AttributeError("'TraceMeta' object has no attribute 'hosts'")

    monkeypatch.setattr(ingest_tasks, "_trace_row", broken_row)
    wh = tmp_path / "wh"
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(wh)]) == INTERNAL_ERROR
    assert "AttributeError: 'TraceMeta' object has no attribute 'hosts'" in capsys.readouterr().err
    assert data_partitions(wh) == [] and count(wh, "ingest_errors") == 0


def test_files_settled_before_a_bug_stay_loaded(tmp_path, capsys, monkeypatch):
    good = write_trace(tmp_path / "one" / "r0.json", rank=0)
    bug = write_trace(tmp_path / "two" / "r0.json", rank=0, n_kernels=2)
    break_parser_for(monkeypatch, bug, TypeError("boom"))
    wh = tmp_path / "wh"
    assert main(["ingest", str(good.parent), str(bug.parent), "--warehouse", str(wh)]) == INTERNAL_ERROR
    assert "TypeError: boom" in capsys.readouterr().err
    assert count(wh, "traces") == 1 and count(wh, f"traces WHERE path = '{good}'") == 1


def test_a_data_error_still_fails_only_its_file(tmp_path, capsys):
    write_trace(tmp_path / "run" / "a.json", rank=0)
    (tmp_path / "run" / "b.json").write_text('{"traceEvents": [')
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(tmp_path / "wh")]) == 1
    assert count(tmp_path / "wh", "traces") == 1 and count(tmp_path / "wh", "ingest_errors") == 1


def test_the_bug_error_crosses_from_a_dask_worker_whole():
    error = pickle.loads(pickle.dumps(IngestBugError("/d/a.json", "TypeError: boom (at kineto.py:63)")))
    assert str(error) == (
        "/d/a.json: tracehouse bug while ingesting this file (the file is not blamed; "
        "nothing of it was registered): TypeError: boom (at kineto.py:63)"
    )
