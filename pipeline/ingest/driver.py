"""Ingest orchestration: discover files, parse each on Dask (one file = one task), register them.

Workers hash, parse and write a file's Parquet partitions (temporary name, then rename; see
`ingest_tasks`); the driver alone touches DuckDB and registers each file's partitions and
catalog row in one transaction (see `ingest_register`), so a file's rows appear whole or not
at all. It holds the catalog read-write only in short phases (readers work in between) and
the warehouse's ingest lock throughout. Files whose content hash is already registered are
skipped; Parquet files no transaction registered (an interrupted ingest) are deleted at the
start of the next ingest. One file's failure, a tracehouse bug included, fails that file only; a
bad `--scheduler` or an unusable warehouse stops the ingest with one line.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dask
from dask.local import get_sync
from tracehouse.pipeline.common.errors import DEBUG_VARIABLE, SchedulerError, one_line
from tracehouse.pipeline.discovery.jobs import Discovery
from tracehouse.pipeline.discovery.search import discover
from tracehouse.pipeline.ingest.catalog import (
    clean_orphans,
    coverage_warnings,
    ingest_lock,
    register_run,
    registered_hashes,
)
from tracehouse.pipeline.ingest.register import Batch, Registrar, manifest_row
from tracehouse.pipeline.ingest.summary import IngestSummary
from tracehouse.pipeline.ingest.tasks import FileOutcome, failed_internally, hash_file, load_power, load_trace
from tracehouse.pipeline.progress import Progress, make_progress
from tracehouse.pipeline.warehouse import connect, create_views, create_warehouse

__all__ = [
    "POOL_MIN_BYTES",
    "FileOutcome",
    "IngestSummary",
    "SchedulerError",
    "hash_file",
    "ingest",
    "run_tasks",
]

# Below this many bytes in total (or for a single file) tasks run in-process. Measured on the
# 2-core dev machine under load: 40 files / 6.8 MB took 3.1 s in-process vs 7.3 s on a local
# 2-process pool; 8 files / 93 MB took 6.1 s vs 18.7 s (pool start-up, worker imports and
# contention for 2 cores). The pool pays off only on inputs that take tens of seconds.
POOL_MIN_BYTES = 256 * 1024 * 1024
# How long to wait for `--scheduler` to answer before giving up with one line.
SCHEDULER_TIMEOUT_S = 10
POLL_S = 0.05  # how often the driver looks for completed tasks on a Dask cluster
SCHEDULER_ADDRESS = re.compile(r"tcp://(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>[0-9]{1,5})")


# ---------------------------------------------------------------- scheduling


Task = tuple[Callable[..., FileOutcome], Any]


def check_scheduler_address(address: str) -> str:
    """The address, if it has the form tcp://HOST:PORT; SchedulerError otherwise."""
    match = SCHEDULER_ADDRESS.fullmatch(address)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise SchedulerError(f"--scheduler {address!r}: expected tcp://HOST:PORT, e.g. tcp://node1:8786")
    return address


@contextmanager
def scheduler_client(address: str | None) -> Iterator[Any]:
    """A Dask client of the scheduler at the address (None: no client), or SchedulerError."""
    if address is None:
        yield None
        return
    check_scheduler_address(address)
    from distributed import Client

    try:
        client = Client(address, timeout=SCHEDULER_TIMEOUT_S)
    except Exception as exc:  # refused, unknown host, timed out, not a scheduler: all one line
        reason = one_line(exc) or type(exc).__name__
        raise SchedulerError(f"cannot reach the Dask scheduler at {address}: {reason}") from exc
    with client:
        yield client


def run_tasks(
    tasks: list[Task],
    warehouse_dir: str,
    registered: frozenset[str],
    *,
    client: Any,
    total_bytes: int,
) -> Iterator[list[FileOutcome]]:
    """Run the tasks on Dask (the client's cluster, else locally); yield outcomes in groups as they complete.

    An empty group means nothing completed for a moment: the caller may register what it holds.
    """
    if client is not None:
        yield from _on_client(client, tasks, warehouse_dir, registered)
    elif len(tasks) <= 1 or total_bytes < POOL_MIN_BYTES:
        for fn, job in tasks:
            yield [dask.delayed(fn, pure=False)(job, warehouse_dir, registered).compute(scheduler=get_sync)]
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
            Client(cluster) as local,
        ):
            yield from _on_client(local, tasks, warehouse_dir, registered)


def _on_client(
    client: Any, tasks: list[Task], warehouse_dir: str, registered: frozenset[str]
) -> Iterator[list[FileOutcome]]:
    from distributed import as_completed

    [shared] = client.scatter([registered], broadcast=True)  # one object, not its items
    futures = {client.submit(fn, job, warehouse_dir, shared, pure=False): (fn, job) for fn, job in tasks}
    completed = as_completed(futures)
    while not completed.is_empty():
        done = completed.next_batch(block=False)
        if not done:
            time.sleep(POLL_S)
        yield [_outcome(future, *futures[future]) for future in done]


def _outcome(future: Any, fn: Callable[..., FileOutcome], job: Any) -> FileOutcome:
    """A completed task's outcome; a task that raised (a worker died, a bug) fails its file only."""
    try:
        return future.result()
    except Exception as exc:
        if os.environ.get(DEBUG_VARIABLE) == "1":
            raise
        kind = "power" if fn is load_power else "trace"
        return failed_internally(kind, job.path, exc)


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
    with scheduler_client(scheduler) as client:  # first: a bad scheduler writes nothing
        found = discover(paths, study=study, run=run, ranks=ranks)
        warehouse = create_warehouse(Path(warehouse_dir)).absolute()
        summary = IngestSummary(warehouse=str(warehouse), not_traces=list(found.not_traces))
        reporter = make_progress(progress)
        try:
            with ingest_lock(warehouse):
                _load_all(found, warehouse, summary=summary, reporter=reporter, client=client)
        finally:
            reporter.finish()
    summary.seconds = time.perf_counter() - started
    return summary


def _load_all(
    found: Discovery, warehouse: Path, *, summary: IngestSummary, reporter: Progress, client: Any
) -> None:
    """Register the runs, run every task and register its outcome, then refresh the views."""
    tasks: list[Task] = [(load_trace, job) for job in found.traces] + [
        (load_power, job) for job in found.power
    ]
    total_bytes = sum(job.path.stat().st_size for _, job in tasks)
    batch = Batch(warehouse, summary, reporter, found.traces)
    with connect(warehouse) as connection, batch.phase(connection):
        clean_orphans(connection, warehouse)
        for source in found.runs:
            register_run(connection, manifest_row(source))
        reporter.start(len(tasks) + len(found.errors))
        for path, reason in found.errors:
            batch.fail_unread(path, reason)
        registered = registered_hashes(connection)
    registrar = Registrar(batch, warehouse)
    try:
        for group in run_tasks(tasks, str(warehouse), registered, client=client, total_bytes=total_bytes):
            for outcome in group:
                reporter.file_read(outcome.path)
            registrar.add(group)
        registrar.finish(lambda connection: _refresh(connection, summary, batch.seen))
    except BaseException:
        registrar.abort()
        raise


def _refresh(connection: Any, summary: IngestSummary, loaded: set[str]) -> None:
    """Bring the views up to date, then warn of every trace loaded now that has no breakdown."""
    create_views(connection)
    summary.warnings.extend(coverage_warnings(connection, loaded))
