"""A wrong run manifest through the CLI: every trace it concerns is loaded or failed, never dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.wh_helpers import count, write_trace
from tracehouse.pipeline.cli.main import main


def write_manifest(folder: Path, data: dict) -> Path:
    """Write a hand-made manifest.json (any content, valid or not) into folder."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "manifest.json"
    path.write_text(json.dumps(data))
    return path


def ingest_json(capsys, *args: str) -> tuple[int, dict, list[str]]:
    """Run `tracehouse ingest ... --json`: exit status, the JSON summary, the error lines."""
    capsys.readouterr()
    code = main(["ingest", *args, "--json"])
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if ": error: " in line]
    return code, json.loads(captured.out), errors


def recorded(capsys, warehouse: Path) -> list[tuple[str, str]]:
    """(path, reason) of every ingest_errors row, ordered by path then reason."""
    capsys.readouterr()
    query = "SELECT path, reason FROM ingest_errors ORDER BY path, reason"
    assert main(["query", query, "--warehouse", str(warehouse), "--format", "json"]) == 0
    return [(row["path"], row["reason"]) for row in json.loads(capsys.readouterr().out)]


def test_a_listed_trace_that_does_not_exist_fails_and_the_others_load(tmp_path, capsys):
    run = tmp_path / "run"
    write_trace(run / "a.json.gz", rank=None)
    manifest = write_manifest(
        run, {"study": "s", "run_id": "r", "traces": {"0": "a.json.gz", "1": "missing.json.gz"}}
    )
    wh = tmp_path / "wh"
    code, summary, errors = ingest_json(capsys, str(run), "--warehouse", str(wh))
    missing = run / "missing.json.gz"
    reason = f"the trace of rank 1 listed in {manifest} does not exist"
    assert code == 1 and (summary["loaded"], summary["failed"]) == (
        1,
        [{"path": str(missing), "reason": reason, "internal": False}],
    )
    assert errors == [f"tracehouse ingest: error: {missing}: {reason}"]
    assert recorded(capsys, wh) == [(str(missing), reason)]
    assert count(wh, "traces WHERE rank = 0 AND rank_source = 'manifest'") == 1


def test_a_manifest_whose_traces_are_all_missing_is_not_silent(tmp_path, capsys):
    run = tmp_path / "sweep" / "run"
    manifest = write_manifest(run, {"study": "s", "run_id": "r", "traces": {"0": "rank0.json"}})
    code, summary, _ = ingest_json(capsys, str(tmp_path / "sweep"), "--warehouse", str(tmp_path / "wh"))
    assert code == 1
    assert summary["failed"] == [
        {
            "path": str(run / "rank0.json"),
            "reason": f"the trace of rank 0 listed in {manifest} does not exist",
            "internal": False,
        }
    ]


def test_one_file_listed_for_two_ranks_fails_naming_both(tmp_path, capsys):
    run = tmp_path / "run"
    write_trace(run / "a.json", rank=None)
    write_trace(run / "b.json", rank=None, n_kernels=2)
    manifest = write_manifest(
        run, {"study": "s", "run_id": "r", "traces": {"0": "a.json", "1": "a.json", "2": "b.json"}}
    )
    wh = tmp_path / "wh"
    code, summary, errors = ingest_json(capsys, str(run), "--warehouse", str(wh))
    reason = f"{manifest} lists it as the trace of ranks 0 and 1; a file holds one rank"
    assert code == 1 and summary["loaded"] == 1
    assert errors == [f"tracehouse ingest: error: {run / 'a.json'}: {reason}"]
    assert recorded(capsys, wh) == [(str(run / "a.json"), reason)]
    assert count(wh, "traces WHERE rank = 2") == 1 and count(wh, "traces") == 1


def test_a_listed_trace_with_any_file_name_is_read(tmp_path, capsys):
    run = tmp_path / "run"
    write_trace(run / "rank0.trace", rank=None)
    write_manifest(run, {"study": "s", "run_id": "r", "traces": {"0": "rank0.trace"}})
    code, summary, _ = ingest_json(capsys, str(run), "--warehouse", str(tmp_path / "wh"))
    assert (code, summary["loaded"], summary["failed"]) == (0, 1, [])


@pytest.mark.parametrize(
    "data, message",
    [
        ({"study": 3}, "run_id is required"),
        ({"study": 3, "run_id": "r"}, "study must be a string, got 3"),
        (
            {"study": "s", "run_id": "r", "world_size": "eight"},
            "world_size must be an integer or null, got 'eight'",
        ),
        (
            {"study": "s", "run_id": "r", "traces": ["t.json"]},
            "traces must be an object of strings, got ['t.json']",
        ),
    ],
)
def test_an_invalid_manifest_fails_every_trace_of_its_folder(tmp_path, capsys, data, message):
    run = tmp_path / "run"
    traces = [write_trace(run / "t.json", rank=0), write_trace(run / "u.json.gz", rank=1)]
    manifest = write_manifest(run, data)
    other = write_trace(tmp_path / "other" / "o.json", rank=0)
    wh = tmp_path / "wh"
    code, summary, errors = ingest_json(capsys, str(run), str(other.parent), "--warehouse", str(wh))
    because = f"its run's manifest.json is invalid: {message}"
    expected = [(str(manifest), message)] + [(str(t), because) for t in traces]
    assert code == 1 and summary["loaded"] == 1
    assert sorted((f["path"], f["reason"]) for f in summary["failed"]) == expected
    assert sorted(errors) == sorted(f"tracehouse ingest: error: {p}: {r}" for p, r in expected)
    assert recorded(capsys, wh) == expected


def test_a_second_manifest_for_one_run_fails_its_traces(tmp_path, capsys):
    first = write_manifest(tmp_path / "a", {"study": "s", "run_id": "r"})
    write_trace(tmp_path / "a" / "t.json", rank=0)
    second = write_manifest(tmp_path / "b", {"study": "s", "run_id": "r"})
    trace = write_trace(tmp_path / "b" / "t.json", rank=1)
    code, summary, _ = ingest_json(
        capsys, str(tmp_path / "a"), str(tmp_path / "b"), "--warehouse", str(tmp_path / "wh")
    )
    reason = f"run s/r is already defined by {first}"
    assert code == 1 and summary["loaded"] == 1
    assert sorted((f["path"], f["reason"]) for f in summary["failed"]) == [
        (str(second), reason),
        (str(trace), f"its run's manifest.json cannot be used: {reason}"),
    ]


def test_a_rank_option_contradicting_the_manifest_fails(tmp_path, capsys):
    run = tmp_path / "run"
    trace = write_trace(run / "t.json", rank=None)
    write_manifest(run, {"study": "s", "run_id": "r", "traces": {"0": "t.json"}})
    args = (str(run), "--warehouse", str(tmp_path / "wh"), "--rank", "t.json=1")
    code, summary, _ = ingest_json(capsys, *args)
    assert (code, summary["loaded"]) == (1, 0)
    assert summary["failed"] == [
        {
            "path": str(trace),
            "reason": "--rank (Python: ranks=) says rank 1 but manifest.json lists it as rank 0",
            "internal": False,
        }
    ]
