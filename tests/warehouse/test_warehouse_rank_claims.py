"""Rank claims: every claimant of a shared rank fails, whatever the completion order or rank source."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
import tracehouse.pipeline.ingest.load as load_module
from support.wh_helpers import checksums, count, write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.ingest.driver import ingest


class Recorder:
    """A progress reporter that keeps every call."""

    def __init__(self) -> None:
        self.total, self.read, self.done, self.finished = 0, [], [], False

    def start(self, total: int) -> None:
        self.total = total

    def file_read(self, path: str) -> None:
        self.read.append(Path(path).name)

    def file_done(self, path: str, status: str, detail: str) -> None:
        self.done.append((Path(path).name, status))

    def finish(self) -> None:
        self.finished = True


def in_order(monkeypatch, names: list[str]) -> None:
    """Make the tasks' outcomes arrive in the given order of file names (as Dask may deliver them)."""
    real = load_module.run_tasks

    def run_tasks(*args, **kwargs):
        outcomes = {Path(o.path).name: o for group in real(*args, **kwargs) for o in group}
        assert sorted(outcomes) == sorted(names)
        yield from ([outcomes[name]] for name in names)

    monkeypatch.setattr(load_module, "run_tasks", run_tasks)


def three_claim_rank_zero(run: Path) -> dict[str, Path]:
    """a, b and c claim distributedInfo.rank 0 of one run (different contents); d is rank 1.

    Without the stated run, the folder would split into runs where ranks clash (discovery.grouping).
    """
    return {
        "a.json": write_trace(run / "a.json", rank=0, n_kernels=2),
        "b.json": write_trace(run / "b.json", rank=0, n_kernels=3),
        "c.json": write_trace(run / "c.json", rank=0, n_kernels=4),
        "d.json": write_trace(run / "d.json", rank=1, n_kernels=5),
    }


def claim_reason(others: list[Path]) -> str:
    return "rank 0 of run default/run is also claimed by " + ", ".join(str(p) for p in sorted(others))


# Every order of the three claimants, with the other rank's file arriving first, between or last.
ORDERS = [
    [*order[: i % 4], "d.json", *order[i % 4 :]]
    for i, order in enumerate(itertools.permutations(["a.json", "b.json", "c.json"]))
]


@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_every_claimant_fails_naming_the_others_in_any_order(tmp_path, capsys, monkeypatch, order):
    files = three_claim_rank_zero(tmp_path / "run")
    in_order(monkeypatch, list(order))
    wh = tmp_path / "wh"
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(wh), "--run", "run", "--json"]) == 1
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    claimants = [files[n] for n in ("a.json", "b.json", "c.json")]
    expected = sorted((str(p), claim_reason([o for o in claimants if o != p])) for p in claimants)
    assert sorted((f["path"], f["reason"]) for f in summary["failed"]) == expected
    assert (summary["loaded"], summary["skipped"], summary["events"]) == (1, 0, 11)
    errors = sorted(line for line in captured.err.splitlines() if ": error: " in line)
    assert errors == [f"tracehouse ingest: error: {p}: {r}" for p, r in expected]
    loaded = re.findall(r"\[(\d+)/4\] loaded (\S+)", captured.err)  # four files, counted once each
    assert [path for _, path in loaded] == [str(files["d.json"])] and int(loaded[0][0]) <= 4
    assert count(wh, "traces") == 1 and count(wh, "traces WHERE rank = 1") == 1
    assert count(wh, "events") == 11
    assert count(wh, "ingest_errors") == 3 and count(wh, "ingest_errors WHERE content_hash IS NULL") == 0
    parquet = [p for p in (wh / "parquet").rglob("*.parquet") if p.name != "_empty.parquet"]
    assert parquet and all("rank=1" in p.as_posix() for p in parquet)


def test_the_warehouse_is_the_same_whatever_the_order(tmp_path, monkeypatch):
    three_claim_rank_zero(tmp_path / "run")
    sums = []
    for i, order in enumerate(
        [["a.json", "b.json", "c.json", "d.json"], ["d.json", "c.json", "a.json", "b.json"]]
    ):
        in_order(monkeypatch, order)
        ingest([tmp_path / "run"], tmp_path / f"wh{i}", run="run")
        sums.append(checksums(tmp_path / f"wh{i}"))
    assert sums[0] == sums[1]


def test_each_file_is_reported_once(tmp_path, monkeypatch):
    three_claim_rank_zero(tmp_path / "run")
    write_trace(tmp_path / "run" / "copy_of_d.json", rank=1, n_kernels=5)  # same content as d
    in_order(monkeypatch, ["a.json", "d.json", "b.json", "copy_of_d.json", "c.json"])
    progress = Recorder()
    summary = ingest([tmp_path / "run"], tmp_path / "wh", run="run", progress=progress)
    assert progress.total == 5 and progress.finished
    # Progress follows the work: each file is read as its task comes back, before claims settle.
    assert progress.read == ["a.json", "d.json", "b.json", "copy_of_d.json", "c.json"]
    assert sorted(progress.done) == [
        ("a.json", "failed"),
        ("b.json", "failed"),
        ("c.json", "failed"),
        ("copy_of_d.json", "skipped"),
        ("d.json", "loaded"),
    ]
    assert (summary.loaded, summary.skipped, len(summary.failed)) == (1, 1, 3)


def test_a_rank_held_by_an_earlier_ingest_stays_and_every_newcomer_fails(tmp_path, monkeypatch):
    held = write_trace(tmp_path / "run" / "a.json", rank=0)
    assert ingest([tmp_path / "run"], tmp_path / "wh").loaded == 1
    before = checksums(tmp_path / "wh")
    write_trace(tmp_path / "more" / "b.json", rank=0, n_kernels=2)
    write_trace(tmp_path / "more" / "c.json", rank=0, n_kernels=4)
    in_order(monkeypatch, ["c.json", "b.json"])
    summary = ingest([tmp_path / "more"], tmp_path / "wh", run="run")
    assert sorted(summary.failed) == [
        (str(tmp_path / "more" / name), f"rank 0 of run default/run is also claimed by {held}")
        for name in ("b.json", "c.json")
    ]
    after = checksums(tmp_path / "wh")
    assert {k: v for k, v in after.items() if k != "ingest_errors"} == {
        k: v for k, v in before.items() if k != "ingest_errors"
    }


def test_a_claim_settles_when_its_run_is_done_not_before(tmp_path, monkeypatch):
    """A rank of one run is reported as soon as no task of that run is out, while another run goes on."""
    write_trace(tmp_path / "one" / "r0.json", rank=0)
    write_trace(tmp_path / "two" / "s0.json", rank=0, n_kernels=2)
    write_trace(tmp_path / "two" / "s1.json", rank=1, n_kernels=3)
    in_order(monkeypatch, ["s0.json", "r0.json", "s1.json"])
    progress = Recorder()
    ingest([tmp_path / "one", tmp_path / "two"], tmp_path / "wh", progress=progress)
    assert progress.done == [("r0.json", "loaded"), ("s0.json", "loaded"), ("s1.json", "loaded")]


def test_ranks_known_before_parsing_and_read_from_the_trace_clash_alike(tmp_path):
    # a and b get rank 0 from --rank; c states rank 0 in its distributedInfo: all three fail
    write_trace(tmp_path / "run" / "a.json", rank=None)
    write_trace(tmp_path / "run" / "b.json", rank=None, n_kernels=2)
    write_trace(tmp_path / "run" / "c.json", rank=0, n_kernels=3)
    summary = ingest([tmp_path / "run"], tmp_path / "wh", ranks={"a.json": 0, "b.json": 0})
    names = ["a.json", "b.json", "c.json"]
    assert sorted(summary.failed) == [
        (str(tmp_path / "run" / n), claim_reason([tmp_path / "run" / o for o in names if o != n]))
        for n in names
    ]
    assert summary.loaded == 0 and count(tmp_path / "wh", "traces") == 0
