"""Ingest orchestration: discover files, parse each on Dask (one file = one task), register them.

Workers hash, parse and write a file's Parquet partitions (temporary name, then rename; see
`ingest_tasks`); the driver alone touches DuckDB and registers each file's partitions and
catalog row in one transaction (see `ingest_register`), so a file's rows appear whole or not
at all. Files whose content hash is already registered are skipped; Parquet files no
transaction registered (an interrupted ingest) are deleted at the start of the next ingest.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask
from dask.local import get_sync
from tracehouse.pipeline.discovery import discover
from tracehouse.pipeline.ingest_catalog import clean_orphans, register_run, registered_hashes
from tracehouse.pipeline.ingest_register import Batch, manifest_row
from tracehouse.pipeline.ingest_tasks import FileOutcome, hash_file, load_power, load_trace
from tracehouse.pipeline.progress import Progress, make_progress
from tracehouse.pipeline.warehouse import connect, create_views, create_warehouse

__all__ = ["POOL_MIN_BYTES", "FileOutcome", "IngestSummary", "hash_file", "ingest", "run_tasks"]

# Below this many bytes in total (or for a single file) tasks run in-process. Measured on the
# 2-core dev machine under load: 40 files / 6.8 MB took 3.1 s in-process vs 7.3 s on a local
# 2-process pool; 8 files / 93 MB took 6.1 s vs 18.7 s (pool start-up, worker imports and
# contention for 2 cores). The pool pays off only on inputs that take tens of seconds.
POOL_MIN_BYTES = 256 * 1024 * 1024


@dataclass(kw_only=True)
class IngestSummary:
    """The result of one ingest: counts, failures (path and one-line reason) and time taken."""

    warehouse: str
    loaded: int = 0
    skipped: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    events: int = 0
    power_files: int = 0
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        """0 when every file loaded or was skipped, 1 when any failed."""
        return 1 if self.failed else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "warehouse": self.warehouse,
            "loaded": self.loaded,
            "skipped": self.skipped,
            "failed": [{"path": p, "reason": r} for p, r in self.failed],
            "events": self.events,
            "power_files": self.power_files,
            "seconds": round(self.seconds, 3),
        }


# ---------------------------------------------------------------- scheduling


Task = tuple[Callable[..., FileOutcome], Any]


def run_tasks(
    tasks: list[Task],
    warehouse_dir: str,
    registered: frozenset[str],
    *,
    scheduler: str | None,
    total_bytes: int,
) -> Iterator[FileOutcome]:
    """Run the tasks on Dask and yield outcomes as they complete."""
    if scheduler:
        from distributed import Client

        with Client(scheduler) as client:
            yield from _on_client(client, tasks, warehouse_dir, registered)
    elif len(tasks) <= 1 or total_bytes < POOL_MIN_BYTES:
        for fn, job in tasks:
            yield dask.delayed(fn, pure=False)(job, warehouse_dir, registered).compute(scheduler=get_sync)
    else:
        from distributed import Client, LocalCluster

        workers = max(1, min(os.cpu_count() or 1, len(tasks)))
        with (
            LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield from _on_client(client, tasks, warehouse_dir, registered)


def _on_client(client: Any, tasks: list[Task], warehouse_dir: str, registered: frozenset[str]) -> Iterator:
    from distributed import as_completed

    [shared] = client.scatter([registered], broadcast=True)  # one object, not its items
    futures = {client.submit(fn, job, warehouse_dir, shared, pure=False): (fn, job) for fn, job in tasks}
    for future in as_completed(futures):
        fn, job = futures[future]
        try:
            yield future.result()
        except Exception as exc:  # a worker that died: the file fails, the others go on
            kind = "power" if fn is load_power else "trace"
            yield FileOutcome(kind=kind, path=str(job.path), status="failed", reason=f"task failed: {exc!r}")


def ingest(
    paths: Iterable[str | Path],
    warehouse_dir: str | Path,
    *,
    study: str | None = None,
    run: str | None = None,
    ranks: Mapping[str, int] | None = None,
    scheduler: str | None = None,
    progress: str | Progress | None = "off",
) -> IngestSummary:
    """Ingest trace files/directories (and the power logs their manifests list) into a warehouse."""
    started = time.perf_counter()
    reporter = make_progress(progress)
    found = discover(paths, study=study, run=run, ranks=ranks)
    warehouse = create_warehouse(Path(warehouse_dir)).absolute()
    summary = IngestSummary(warehouse=str(warehouse))
    tasks: list[Task] = [(load_trace, job) for job in found.traces] + [
        (load_power, job) for job in found.power
    ]
    total_bytes = sum(job.path.stat().st_size for _, job in tasks)
    with connect(warehouse) as connection:
        clean_orphans(connection, warehouse)
        for source in found.runs:
            register_run(connection, manifest_row(source))
        batch = Batch(connection, warehouse, summary, reporter)
        reporter.start(len(tasks) + len(found.errors))
        for path, reason in found.errors:
            batch.fail(path, None, reason)
        registered = registered_hashes(connection)
        for outcome in run_tasks(
            tasks, str(warehouse), registered, scheduler=scheduler, total_bytes=total_bytes
        ):
            batch.accept(outcome)
        create_views(connection)
    reporter.finish()
    summary.seconds = time.perf_counter() - started
    return summary
