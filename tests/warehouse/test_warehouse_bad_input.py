"""Bad input through the CLI: one error line naming the file, existing rows unchanged, still queryable."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from support.wh_helpers import checksums, count, write_trace
from tracehouse.pipeline.cli.main import main

GOOD_EVENT = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}


def trace_text(events: list[dict], rank: int = 0) -> str:
    return json.dumps(
        {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 1}, "traceEvents": events}
    )


def make_bad(kind: str, folder: Path) -> Path:
    """Write one bad input of the given kind and return its path."""
    good = trace_text([GOOD_EVENT])
    files = {
        "truncated": ("t.json", good[: len(good) // 2].encode()),
        "corrupt_gzip": ("c.json.gz", gzip.compress(good.encode())[:25] + b"\x00garbage\x00"),
        "empty": ("e.json", b""),
        "not_a_trace": ("n.json", json.dumps({"loss": [1.0, 0.5], "step": 3}).encode()),
        "no_events": ("z.json", trace_text([]).encode()),
        "no_ts_dur": (
            "d.json",
            trace_text([{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1}]).encode(),
        ),
    }
    name, data = files[kind]
    (folder / name).write_bytes(data)
    return folder / name


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if ": error: " in line]


@pytest.fixture
def loaded(tmp_path):
    """A warehouse holding one good run, and its contents before the bad input."""
    write_trace(tmp_path / "good" / "r0.json", rank=0)
    wh = tmp_path / "wh"
    assert main(["ingest", str(tmp_path / "good"), "--warehouse", str(wh)]) == 0
    sums = checksums(wh)
    return wh, {k: v for k, v in sums.items() if k not in ("ingest_errors", "run_manifests")}


@pytest.mark.parametrize(
    "kind, reason",
    [
        ("truncated", "invalid JSON"),
        ("corrupt_gzip", "corrupt gzip"),
        ("empty", "empty file"),
        ("not_a_trace", "no trace events"),
        ("no_events", "no trace events"),
        ("no_ts_dur", "lack ts or dur"),
    ],
)
def test_bad_file_is_one_line_and_changes_no_rows(tmp_path, capsys, loaded, kind, reason):
    wh, before = loaded
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = make_bad(kind, bad_dir)
    capsys.readouterr()
    assert main(["ingest", str(bad), "--warehouse", str(wh), "--run", "bad"]) == 1
    lines = error_lines(capsys.readouterr().err)
    assert (
        len(lines) == 1 and lines[0].startswith(f"tracehouse ingest: error: {bad}: ") and reason in lines[0]
    )
    after = checksums(wh)
    assert {k: v for k, v in after.items() if k in before} == before
    assert (
        main(["query", "SELECT path, reason FROM ingest_errors", "--warehouse", str(wh), "--format", "json"])
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [r["path"] for r in rows] == [str(bad)] and reason in rows[0]["reason"]


def test_missing_path_is_one_line(tmp_path, capsys, loaded):
    wh, before = loaded
    capsys.readouterr()
    missing = tmp_path / "nowhere" / "x.json"
    assert main(["ingest", str(missing), "--warehouse", str(wh)]) == 1
    assert error_lines(capsys.readouterr().err) == [
        f"tracehouse ingest: error: {missing}: no such file or directory"
    ]
    assert {k: v for k, v in checksums(wh).items() if k in before} == before


def test_duplicate_ranks_in_a_directory(tmp_path, capsys, loaded):
    wh, before = loaded
    write_trace(tmp_path / "dup" / "a.json", rank=1)
    write_trace(tmp_path / "dup" / "b.json", rank=1, n_kernels=2)
    capsys.readouterr()
    assert main(["ingest", str(tmp_path / "dup"), "--warehouse", str(wh), "--run", "dup"]) == 1
    lines = error_lines(capsys.readouterr().err)
    assert len(lines) == 2 and all("rank 1 of run default/dup is also claimed by" in line for line in lines)
    assert {k: v for k, v in checksums(wh).items() if k in before} == before


def test_ints_beyond_64_bits_in_args_load(tmp_path, loaded):
    wh, _ = loaded
    event = {**GOOD_EVENT, "args": {"External id": 2**70, "Sequence number": -(2**80), "stream": 3}}
    path = tmp_path / "big" / "big.json"
    path.parent.mkdir()
    path.write_text(trace_text([event]))
    assert main(["ingest", str(path), "--warehouse", str(wh)]) == 0
    assert count(wh, "events WHERE run_id = 'big'") == 1


def test_invalid_utf8_in_names_loads_with_replacement_characters(tmp_path, capsys, loaded):
    wh, _ = loaded
    path = tmp_path / "utf" / "u.json"
    path.parent.mkdir()
    path.write_bytes(
        trace_text([{**GOOD_EVENT, "name": "NAME"}]).encode().replace(b"NAME", b"aten::\xff\xfemm")
    )
    assert main(["ingest", str(path), "--warehouse", str(wh)]) == 0
    capsys.readouterr()
    main(["query", "SELECT name FROM events WHERE run_id = 'u'", "--warehouse", str(wh), "--format", "json"])
    assert json.loads(capsys.readouterr().out) == [{"name": "aten::\ufffd\ufffdmm"}]
