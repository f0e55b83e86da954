"""The driver registers a worker's Parquet only when it sees it whole (e.g. a warehouse not shared)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import polars as pl
import pytest
import tracehouse.pipeline.ingest.driver as driver_module
import tracehouse.pipeline.ingest.load as load_module
from support.wh_helpers import count, write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.pipeline.ingest.engine import THREADS
from tracehouse.pipeline.ingest.tasks import hash_file
from tracehouse.pipeline.warehouse.database import CACHE_VARIABLE

SHARED = "(the warehouse must be on a filesystem shared with the Dask workers)"


def worker_disk(
    monkeypatch,
    elsewhere: Path,
    *,
    keep_events_rows: int | None = None,
    events_bytes: bytes | None = None,
    decoy: Path | None = None,
) -> None:
    """Trace tasks behave as on a worker with its own disk: the driver does not see what they write.

    keep_events_rows: instead, the driver sees an events partition holding only this many rows;
    events_bytes: instead, it sees these bytes in the events partition (put there whole), and
    a folder `decoy`, if given, gets the partition as written at the same relative path.
    """
    real = load_module.load_trace

    def load_trace(job, warehouse_dir, registered):
        outcome = real(job, warehouse_dir, registered)
        for table, relative, *_ in outcome.files:
            source = Path(warehouse_dir) / relative
            if events_bytes is not None:
                if table == "events":
                    if decoy is not None:
                        (decoy / relative).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy(source, decoy / relative)
                    source.with_suffix(".tmp").write_bytes(events_bytes)
                    source.with_suffix(".tmp").replace(source)
            elif keep_events_rows is None:
                (elsewhere / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.move(source, elsewhere / relative)
            elif table == "events":
                pl.read_parquet(source, hive_partitioning=False).head(keep_events_rows).write_parquet(source)
        return outcome

    monkeypatch.setattr(load_module, "load_trace", load_trace)


def partitions(wh: Path) -> list[Path]:
    return [p for p in (wh / "parquet").rglob("*.parquet") if p.name != "_empty.parquet"]


def test_partitions_the_driver_cannot_see_fail_the_file_and_the_next_ingest_loads_it(
    tmp_path, capsys, monkeypatch
):
    trace = write_trace(tmp_path / "run" / "r0.json", rank=0)
    wh = tmp_path / "wh"
    worker_disk(monkeypatch, tmp_path / "worker-disk")
    assert main(["ingest", str(trace), "--warehouse", str(wh)]) == 1
    content_hash = hash_file(trace)[1]
    events = f"parquet/events/study=default/run_id=run/rank=0/{content_hash}.parquet"
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    assert errors == [
        f"tracehouse ingest: error: {trace}: the worker's Parquet partition {events} "
        f"is not visible from the driver {SHARED}"
    ]
    assert count(wh, "traces") == 0 and count(wh, "parquet_files") == 0 and partitions(wh) == []
    assert count(wh, f"ingest_errors WHERE content_hash = '{content_hash}'") == 1

    monkeypatch.undo()  # the warehouse is now shared: the file is not skipped, it loads
    summary = ingest([trace], wh)
    assert (summary.loaded, summary.skipped, summary.failed) == (1, 0, [])
    assert count(wh, "events") == 7 and count(wh, "ingest_errors") == 0


def test_a_partition_with_other_rows_than_the_worker_wrote_fails_the_file(tmp_path, monkeypatch):
    trace = write_trace(tmp_path / "run" / "r0.json", rank=0)
    other = write_trace(tmp_path / "run" / "r1.json", rank=1, n_kernels=4)
    worker_disk(monkeypatch, tmp_path / "worker-disk", keep_events_rows=2)
    summary = ingest([tmp_path / "run"], tmp_path / "wh")
    assert summary.loaded == 0
    events = f"parquet/events/study=default/run_id=run/rank=0/{hash_file(trace)[1]}.parquet"
    assert sorted(summary.failed)[0] == (
        str(trace),
        f"the worker's Parquet partition {events} has 2 rows seen from the driver, "
        f"the worker wrote 7 {SHARED}",
    )
    assert [path for path, _ in sorted(summary.failed)] == [str(trace), str(other)]
    assert count(tmp_path / "wh", "traces") == 0 and partitions(tmp_path / "wh") == []


def test_a_partition_the_driver_cannot_read_fails_the_file_naming_it(tmp_path, monkeypatch):
    trace = write_trace(tmp_path / "run" / "r0.json", rank=0)
    worker_disk(monkeypatch, tmp_path / "worker-disk", events_bytes=b"PAR1 cut short")
    summary = ingest([trace], tmp_path / "wh")
    events = f"parquet/events/study=default/run_id=run/rank=0/{hash_file(trace)[1]}.parquet"
    [(path, reason)] = summary.failed
    assert path == str(trace)
    assert reason.startswith(f"the worker's Parquet partition {events} is unreadable on the driver: ")
    assert reason.endswith(SHARED) and "\n" not in reason
    assert count(tmp_path / "wh", "traces") == 0 and partitions(tmp_path / "wh") == []


@pytest.mark.parametrize("template", [False, True])
def test_an_unreadable_partition_met_while_a_new_catalog_is_made_fails_only_its_file(
    tmp_path, monkeypatch, template
):
    """In a new warehouse the tasks (on threads here) run while the catalog is made. Made in place
    (no template catalog can be kept), making it reads every partition on disk: one unreadable
    there stops the tasks, the catalog is made alone and the tasks run again. Copied from the
    template, it reads none and is made once. Either way the file fails at its registration."""
    if not template:  # the cache folder cannot be made: the catalog is created in place
        (tmp_path / "a-file").write_text("not a folder")
        monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "a-file" / "cache"))
    traces = [write_trace(tmp_path / "run" / f"r{rank}.json", rank=rank, world_size=2) for rank in (0, 1)]
    worker_disk(monkeypatch, tmp_path / "worker-disk", events_bytes=b"PAR1 cut short")
    real_create = load_module.create_warehouse
    calls = []

    def create_after_a_partition(warehouse, **options):  # a task's unreadable partition is on disk first
        calls.append(warehouse)
        deadline = time.monotonic() + 30
        while len(calls) == 1 and not unreadable(warehouse) and time.monotonic() < deadline:
            time.sleep(0.005)
        return real_create(warehouse, **options)

    def unreadable(warehouse: Path) -> bool:
        events = (p for p in partitions(warehouse) if p.parts[-5] == "events")
        return any(p.read_bytes() == b"PAR1 cut short" for p in events)

    monkeypatch.setattr(load_module, "create_warehouse", create_after_a_partition)
    monkeypatch.setattr(driver_module, "local_engine", lambda sizes: (THREADS, 2))
    summary = ingest(traces, tmp_path / "wh")
    if template:
        assert len(calls) == 1
    else:
        assert len(calls) == 2, "the catalog was made once: the tasks did not run while it was made"
    assert sorted(path for path, _ in summary.failed) == sorted(map(str, traces))
    assert all("is unreadable on the driver: " in reason for _, reason in summary.failed)
    assert count(tmp_path / "wh", "traces") == 0 and partitions(tmp_path / "wh") == []


def test_a_partition_read_from_the_current_directory_instead_fails_the_file(tmp_path, monkeypatch):
    """DuckDB looks for a relative path in the current directory first: a good copy there of the
    warehouse's unreadable partition is not taken for it."""
    trace = write_trace(tmp_path / "run" / "r0.json", rank=0)
    worker_disk(monkeypatch, tmp_path / "worker-disk", events_bytes=b"PAR1 cut short", decoy=tmp_path / "cwd")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    summary = ingest([trace], tmp_path / "wh")
    events = f"parquet/events/study=default/run_id=run/rank=0/{hash_file(trace)[1]}.parquet"
    assert (tmp_path / "cwd" / events).is_file()
    [(path, reason)] = summary.failed
    assert path == str(trace)
    assert reason.startswith(f"the worker's Parquet partition {events} is unreadable on the driver: ")
    assert count(tmp_path / "wh", "traces") == 0 and partitions(tmp_path / "wh") == []


def test_a_warehouse_whose_path_looks_like_a_glob_checks_its_own_partitions(tmp_path, monkeypatch):
    """DuckDB expands glob characters in an absolute path: `wh[1]` must not read `wh1`."""
    trace = write_trace(tmp_path / "run" / "r0.json", rank=0)
    events = f"parquet/events/study=default/run_id=run/rank=0/{hash_file(trace)[1]}.parquet"
    assert ingest([trace], tmp_path / "wh1").failed == []  # a good partition at the path `wh[1]` globs to
    worker_disk(monkeypatch, tmp_path / "worker-disk", events_bytes=b"PAR1 cut short")
    summary = ingest([trace], tmp_path / "wh[1]")
    [(path, reason)] = summary.failed
    assert path == str(trace) and (tmp_path / "wh1" / events).is_file()
    assert reason.startswith(f"the worker's Parquet partition {events} is unreadable on the driver: ")
    assert count(tmp_path / "wh[1]", "traces") == 0
