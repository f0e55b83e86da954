"""A bug of tracehouse while ingesting one file fails that file only, marked as an internal error.

The rest of the batch loads, the exit status says something failed, the reason names the bug
and where it was raised (so a user can report it), and ingest_errors marks it `internal`, so a
bug is never mistaken for bad input. TRACEHOUSE_DEBUG=1 raises it instead, for the traceback.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
import tracehouse.pipeline.ingest.tasks as ingest_tasks
import tracehouse.pipeline.parsers.kineto.parse as kineto
from support.wh_helpers import count, write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.ingest.driver import ingest


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error" in line]


def ingest_errors(wh: Path) -> list[tuple]:
    with duckdb.connect(str(wh / "tracehouse.duckdb"), read_only=True) as c:
        return c.sql("SELECT path, reason, internal FROM ingest_errors ORDER BY path").fetchall()


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
        ValueError("a polars-like error nobody anticipated"),
    ],
)
def test_a_bug_fails_its_file_only_marked_internal(tmp_path, capsys, monkeypatch, exc):
    good_a = write_trace(tmp_path / "run" / "a.json", rank=0)
    bug = write_trace(tmp_path / "run" / "b.json", rank=1, n_kernels=2)
    good_c = write_trace(tmp_path / "run" / "c.json", rank=2, n_kernels=4)
    break_parser_for(monkeypatch, bug, exc)
    wh = tmp_path / "wh"
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(wh)]) == 1
    lines = error_lines(capsys.readouterr().err)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"tracehouse ingest: error: {bug}: {ingest_tasks.INTERNAL_PREFIX}")
    assert f"{type(exc).__name__}: {exc} (at test_warehouse_ingest_bugs.py:" in lines[0]
    [(path, reason, internal)] = ingest_errors(wh)
    assert (path, internal) == (str(bug), True) and reason.startswith(ingest_tasks.INTERNAL_PREFIX)
    assert count(wh, "traces") == 2
    assert count(wh, f"traces WHERE path IN ('{good_a}', '{good_c}')") == 2

    monkeypatch.undo()  # tracehouse fixed: the failed file loads, its error row goes
    summary = ingest([tmp_path / "run"], wh)
    assert (summary.loaded, summary.skipped, summary.failed) == (1, 2, [])
    assert ingest_errors(wh) == []


def test_the_summary_marks_internal_failures(tmp_path, monkeypatch):
    write_trace(tmp_path / "run" / "a.json", rank=0)
    bug = write_trace(tmp_path / "run" / "b.json", rank=1)
    (tmp_path / "run" / "c.json").write_text('{"traceEvents": [')
    break_parser_for(monkeypatch, bug, TypeError("boom"))
    summary = ingest([tmp_path / "run"], tmp_path / "wh")
    failed = {entry["path"]: entry["internal"] for entry in summary.to_dict()["failed"]}
    assert failed == {str(bug): True, str(tmp_path / "run" / "c.json"): False}
    assert summary.loaded == 1 and summary.exit_code == 1


def test_a_bug_after_the_writes_leaves_no_parquet(tmp_path, capsys, monkeypatch):
    write_trace(tmp_path / "run" / "a.json", rank=0)

    def broken_row(*args):
        raise AttributeError("'TraceMeta' object has no attribute 'hosts'")

    monkeypatch.setattr(ingest_tasks, "_trace_row", broken_row)
    wh = tmp_path / "wh"
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(wh)]) == 1
    assert "AttributeError: 'TraceMeta' object has no attribute 'hosts'" in capsys.readouterr().err
    assert data_partitions(wh) == [] and count(wh, "traces") == 0
    assert [internal for _, _, internal in ingest_errors(wh)] == [True]


def test_debug_raises_the_bug_for_its_traceback(tmp_path, monkeypatch):
    bug = write_trace(tmp_path / "run" / "a.json", rank=0)
    break_parser_for(monkeypatch, bug, TypeError("boom"))
    monkeypatch.setenv("TRACEHOUSE_DEBUG", "1")
    with pytest.raises(TypeError, match="boom"):
        main(["ingest", str(tmp_path / "run"), "--warehouse", str(tmp_path / "wh")])


def test_a_data_error_is_not_marked_internal(tmp_path, capsys):
    write_trace(tmp_path / "run" / "a.json", rank=0)
    (tmp_path / "run" / "b.json").write_text('{"traceEvents": [')
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(tmp_path / "wh")]) == 1
    assert count(tmp_path / "wh", "traces") == 1
    assert [internal for _, _, internal in ingest_errors(tmp_path / "wh")] == [False]
