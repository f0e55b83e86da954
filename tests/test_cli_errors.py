"""Through the real CLI, a warehouse that cannot be created and an unexpected exception are one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.testdata import SAMPLE_TRACES
from tracehouse.pipeline.cli.main import main

# `tracehouse query` imports its query function when it runs
from tracehouse.pipeline.warehouse import reading

RUN = str(SAMPLE_TRACES / "tiny-cpu-gloo" / "ddp-ws1")
INTERNAL = (
    "tracehouse: internal error: RuntimeError: boom on two lines "
    "(rerun with TRACEHOUSE_DEBUG=1 for the traceback)\n"
)


def test_a_warehouse_under_a_file_cannot_be_created_in_one_line(tmp_path, capsys) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    target = tmp_path / "a-file" / "wh"
    code = main(["ingest", RUN, "--warehouse", str(target)])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"tracehouse ingest: error: {target}: cannot create the warehouse: Not a directory\n"


def test_a_warehouse_whose_path_has_a_comma_is_refused_in_one_line(tmp_path, capsys) -> None:
    target = tmp_path / "a,b" / "wh"
    code = main(["ingest", RUN, "--warehouse", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and not (tmp_path / "a,b").exists()
    assert err == (
        f"tracehouse ingest: error: {target}: cannot create the warehouse: its path has a comma, which "
        "DuckDB's file_search_path takes for a separator; choose another folder\n"
    )


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc")
def test_a_warehouse_in_proc_cannot_be_created_in_one_line(capsys) -> None:
    code = main(["ingest", RUN, "--warehouse", "/proc/nope"])
    err = capsys.readouterr().err
    assert code == 2
    assert (
        err
        == "tracehouse ingest: error: /proc/nope: cannot create the warehouse: No such file or directory\n"
    )


def _explode(*_args: object, **_kwargs: object) -> None:
    raise RuntimeError("boom on\n  two lines")


def test_an_unexpected_exception_is_one_line_and_status_70(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("TRACEHOUSE_DEBUG", raising=False)
    monkeypatch.setattr(reading, "query", _explode)
    code = main(["query", "select 1", "--warehouse", str(tmp_path)])
    out = capsys.readouterr()
    assert code == 70 and out.out == ""
    assert out.err == INTERNAL


def test_tracehouse_debug_shows_the_traceback(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRACEHOUSE_DEBUG", "1")
    monkeypatch.setattr(reading, "query", _explode)
    with pytest.raises(RuntimeError, match="boom"):
        main(["query", "select 1", "--warehouse", str(tmp_path)])
