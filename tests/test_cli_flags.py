"""One vocabulary of flags: a shared --warehouse default, -o/--out for outputs, --json for summaries."""

from __future__ import annotations

import json
import shutil

import pytest
from tracehouse.pipeline.cli.main import build_parser, main

WRITES = ("report", "analyze", "collect", "calibrate", "export-trace")  # commands that write a file or folder
SUMMARIES = (
    "ingest",
    "analyze",
    "report",
    "diff",
    "export-trace",
    "project",
    "check",
    "forget",
    "collect",
    "calibrate",
    "query",
)
READS_A_WAREHOUSE = (
    "ingest",
    "query",
    "report",
    "analyze",
    "diff",
    "export-trace",
    "project",
    "check",
    "forget",
)


def options(command: str) -> dict[str, object]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return {s: a for a in sub._actions for s in a.option_strings}


@pytest.mark.parametrize("command", WRITES)
def test_a_command_that_writes_takes_o_and_out(command):
    found = options(command)
    assert found["-o"] is found["--out"]


@pytest.mark.parametrize("command", SUMMARIES)
def test_a_command_with_a_summary_takes_json(command):
    assert "--json" in options(command)


@pytest.mark.parametrize("command", READS_A_WAREHOUSE)
def test_every_warehouse_option_has_the_same_default(command, monkeypatch):
    monkeypatch.setenv("TRACEHOUSE_WAREHOUSE", "/somewhere/wh")
    found = options(command)["--warehouse"]
    assert str(found.default) == "/somewhere/wh" and not found.required
    monkeypatch.delenv("TRACEHOUSE_WAREHOUSE")
    assert str(options(command)["--warehouse"].default) == "warehouse"


def test_queries_find_the_default_warehouse(sample_warehouse, tmp_path, monkeypatch, capsys):
    shutil.copytree(sample_warehouse, tmp_path / "warehouse")
    monkeypatch.delenv("TRACEHOUSE_WAREHOUSE")
    monkeypatch.chdir(tmp_path)
    assert main(["query", "select count(*) as n from runs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 9}]


def test_the_older_output_spelling_works_with_a_note(sample_warehouse, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", "--warehouse", str(sample_warehouse), "--output", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    assert "tracehouse report: note: --output is deprecated; use -o/--out" in captured.err
    assert json.loads(captured.out)["html"] == str(out) and out.stat().st_size > 0


def test_out_is_required_once(sample_warehouse, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["report", "--warehouse", str(sample_warehouse)])
    assert "one of the arguments -o/--out" in capsys.readouterr().err
