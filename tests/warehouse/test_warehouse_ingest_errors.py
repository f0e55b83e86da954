"""ingest_errors holds the latest attempt per path, with the content hash of every file that can be read."""

from __future__ import annotations

import json

from support.wh_helpers import write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.pipeline.ingest.tasks import hash_file


def errors(capsys, wh) -> list[tuple[str, str | None, str]]:
    """(path, content_hash, reason) of every ingest_errors row, through `tracehouse query`."""
    capsys.readouterr()
    sql = "SELECT path, content_hash, reason FROM ingest_errors ORDER BY path, reason"
    assert main(["query", sql, "--warehouse", str(wh), "--format", "json"]) == 0
    return [(r["path"], r["content_hash"], r["reason"]) for r in json.loads(capsys.readouterr().out)]


def test_a_fixed_file_leaves_no_error_behind(tmp_path, capsys):
    trace = write_trace(tmp_path / "run" / "a.json", rank=0)
    good = trace.read_bytes()
    trace.write_bytes(good[: len(good) // 2])
    wh = tmp_path / "wh"
    assert main(["ingest", str(trace), "--warehouse", str(wh)]) == 1
    [(path, content_hash, reason)] = errors(capsys, wh)
    assert (path, content_hash) == (str(trace), hash_file(trace)[1]) and "invalid JSON" in reason
    trace.write_bytes(good)
    assert main(["ingest", str(trace), "--warehouse", str(wh)]) == 0
    assert errors(capsys, wh) == []


def test_only_the_latest_failure_of_a_path_is_kept(tmp_path, capsys):
    trace = write_trace(tmp_path / "run" / "a.json", rank=0)
    trace.write_bytes(trace.read_bytes()[:40])
    wh = tmp_path / "wh"
    assert main(["ingest", str(trace), "--warehouse", str(wh)]) == 1
    trace.write_bytes(b"")
    assert main(["ingest", str(trace), "--warehouse", str(wh)]) == 1
    assert errors(capsys, wh) == [(str(trace), hash_file(trace)[1], "empty file")]


def test_errors_found_before_parsing_carry_the_files_hash(tmp_path, capsys):
    a = write_trace(tmp_path / "run" / "a.json", rank=None)
    b = write_trace(tmp_path / "run" / "b.json", rank=None, n_kernels=2)
    wh = tmp_path / "wh"
    ranks = ["--rank", "a.json=0", "--rank", "b.json=0", "--rank", "nope.json=1"]
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(wh), *ranks]) == 1
    assert errors(capsys, wh) == [
        (str(a), hash_file(a)[1], f"rank 0 of run default/run is also claimed by {b}"),
        (str(b), hash_file(b)[1], f"rank 0 of run default/run is also claimed by {a}"),
        ("nope.json", None, "--rank (Python: ranks=) names no trace file being ingested"),  # not a file
    ]


def test_an_unreadable_manifest_carries_its_hash(tmp_path, capsys):
    write_trace(tmp_path / "run" / "a.json", rank=0)
    manifest = tmp_path / "run" / "manifest.json"
    manifest.write_text('{"study": "s", "run_id": ')
    wh = tmp_path / "wh"
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(wh)]) == 1
    assert (str(manifest), hash_file(manifest)[1]) in [(p, h) for p, h, _ in errors(capsys, wh)]


def test_a_skipped_file_forgets_its_old_failure(tmp_path, capsys):
    trace = write_trace(tmp_path / "run" / "x.json", rank=None)
    other = write_trace(tmp_path / "run" / "y.json", rank=None, n_kernels=2)
    copy = tmp_path / "copy" / "x.json"
    copy.parent.mkdir()
    copy.write_bytes(trace.read_bytes())
    wh = tmp_path / "wh"
    assert len(ingest([trace, other], wh, run="r").failed) == 2  # one run of two: no rank
    assert ingest([copy], wh, ranks={str(copy): 3}).loaded == 1
    failed = [str(trace), str(other)]
    assert [p for p, _, _ in errors(capsys, wh)] == failed  # a copy loading elsewhere: still failed
    assert ingest([trace], wh).skipped == 1  # its content is in the warehouse now
    assert [p for p, _, _ in errors(capsys, wh)] == [str(other)]
