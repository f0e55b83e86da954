"""Ingest orchestration: discover files, parse each on Dask (one file = one task), register them.

Files are rank traces, the power logs their manifests list, and nccl-tests output files.

Workers hash, parse and write a file's Parquet partitions (temporary name, then rename; see
`ingest_tasks`); the driver alone touches DuckDB and registers each file's partitions and
catalog row in one transaction (see `ingest_register`), so a file's rows appear whole or not
at all. It holds the catalog read-write only in short phases (readers work in between) and
the warehouse's ingest lock throughout. Files whose content hash is already registered are
skipped; Parquet files no transaction registered (an interrupted ingest) are deleted at the
start of the next ingest. One file's failure, a tracehouse bug included, fails that file only; a
bad `--scheduler` or an unusable warehouse stops the ingest with one line.

On `--scheduler`, a worker's first task is its slowest (0.2-0.5 s more on the dev VM: imports of
the task module, polars and pyarrow, then their first use); `dask worker ADDRESS --preload
tracehouse.pipeline.ingest.tasks` moves the imports to the worker's start-up. What bounds the
speed-up from more workers, measured on a real scheduler: `benchmarks/ingest.py --cluster`.
"""

from __future__ import annotations

import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dask
import dask.threaded
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
from tracehouse.pipeline.ingest.tasks import (
    NCCL_TESTS,
    FileOutcome,
    failed_internally,
    hash_file,
    load_nccl_tests,
    load_power,
    load_trace,
)
from tracehouse.pipeline.progress import Progress, make_progress
from tracehouse.pipeline.warehouse import connect, create_views, create_warehouse

__all__ = [
    "POOL_STARTUP_S",
    "FileOutcome",
    "IngestSummary",
    "SchedulerError",
    "hash_file",
    "ingest",
    "local_engine",
    "run_tasks",
]

# Locally, one file runs in-process; more files run on every core, on Dask's threaded scheduler or a
# process pool (a LocalCluster of one single-threaded worker per core), whichever the estimated
# work says is faster (`local_engine`). Threads start at once but share the GIL; the pool runs
# truly in parallel but costs its start-up. Measured on the 2-core dev VM (2026-12-03,
# `benchmarks/ingest.py --pool-startup`: LocalCluster(n_workers=2, processes=True) + Client, then
# client.run importing the task module on each worker, then close; 3 runs): cluster + client
# 0.60-0.82 s, worker imports 0.21-0.32 s, close 0.14-0.34 s, 1.06-1.29 s in all, plus 0.3 s to
# import distributed.
POOL_STARTUP_S = 1.3
# A task's cost, measured the same day in-process on real traces (hash, decode, Parquet write):
# 195-240 MB/s of uncompressed JSON on traces of 15-87 MB, plus about 0.05 s per file.
TASK_JSON_BYTES_PER_S = 200e6
TASK_FIXED_S = 0.05
# The share of a trace task that holds the GIL (the C scanner's pass, building Python objects),
# so that threads do not overlap it: 8 tasks of 56 MB took 1.55 s one after another and 1.24 s on
# 2 threads (same day, same VM), which 0.6 + 0.4 / 2 = 0.8 of the serial time matches.
THREAD_GIL_SHARE = 0.6
IN_PROCESS, THREADS, PROCESSES = "in-process", "threads", "processes"
# gzip keeps the uncompressed size mod 2^32 (ISIZE); a trace's JSON is about this many times its
# gzip size (10-29x on the shared and sample traces), which picks the multiple of 2^32 to add back.
TYPICAL_GZIP_RATIO = 16
# How long to wait for `--scheduler` to answer before giving up with one line.
SCHEDULER_TIMEOUT_S = 10
POLL_S = 0.05  # how often the driver looks for completed tasks on a Dask cluster
SCHEDULER_ADDRESS = re.compile(r"tcp://(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>[0-9]{1,5})")


# ---------------------------------------------------------------- scheduling


Task = tuple[Callable[..., FileOutcome], Any]
KIND_OF_TASK: dict[Callable[..., FileOutcome], str] = {
    load_trace: "trace",
    load_power: "power",
    load_nccl_tests: NCCL_TESTS,
}


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


def json_size(path: Path) -> int:
    """A file's uncompressed size in bytes: a gzip file's ISIZE footer (mod 2^32, restored), else its size."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size < 18 or f.read(2) != b"\x1f\x8b":
            return size
        f.seek(-4, os.SEEK_END)
        return unwrapped_isize(size, int.from_bytes(f.read(4), "little"))


def unwrapped_isize(gzip_bytes: int, isize: int) -> int:
    """The uncompressed size whose value mod 2^32 is isize, nearest TYPICAL_GZIP_RATIO x the gzip size.

    Never below the gzip size (JSON is never smaller than its gzip).
    """
    wraps = max(0, round((gzip_bytes * TYPICAL_GZIP_RATIO - isize) / 2**32))
    while isize + wraps * 2**32 < gzip_bytes:
        wraps += 1
    return isize + wraps * 2**32


def local_engine(json_sizes: list[int], cores: int | None = None) -> tuple[str, int]:
    """How a local ingest runs its tasks, and on how many workers (see POOL_STARTUP_S).

    One file, or one core: in-process. Else threads or a process pool on every core, whichever
    the estimated work (TASK_JSON_BYTES_PER_S, TASK_FIXED_S) says finishes first.
    """
    workers = min(cores or os.cpu_count() or 1, len(json_sizes))
    if workers < 2:
        return IN_PROCESS, 1
    work_s = sum(size / TASK_JSON_BYTES_PER_S + TASK_FIXED_S for size in json_sizes)
    threads_s = work_s * (THREAD_GIL_SHARE + (1 - THREAD_GIL_SHARE) / workers)
    processes_s = work_s / workers + POOL_STARTUP_S
    return (PROCESSES if processes_s < threads_s else THREADS), workers


def run_tasks(
    tasks: list[Task],
    warehouse_dir: str,
    registered: frozenset[str],
    *,
    client: Any,
    engine: tuple[str, int] = (IN_PROCESS, 1),
) -> Iterator[list[FileOutcome]]:
    """Run the tasks on Dask: the client's cluster, else locally as `engine` says (`local_engine`).

    Yields outcomes in groups as they complete. An empty group means nothing completed for a
    moment: the caller may register what it holds.
    """
    mode, workers = engine
    if client is not None:
        yield from _on_client(client, tasks, warehouse_dir, registered)
    elif mode == THREADS:
        yield from _on_threads(tasks, warehouse_dir, registered, workers)
    elif mode == PROCESSES:
        from distributed import Client, LocalCluster

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
    else:
        for fn, job in tasks:
            yield [dask.delayed(fn, pure=False)(job, warehouse_dir, registered).compute(scheduler=get_sync)]


def _on_threads(
    tasks: list[Task], warehouse_dir: str, registered: frozenset[str], threads: int
) -> Iterator[list[FileOutcome]]:
    """The tasks on Dask's threaded scheduler, computed on a helper thread; outcomes as each completes.

    Dask calls `posttask` as each task completes; the outcome goes through a queue to this (the
    driver's) thread, which registers it while the other tasks run. When the caller stops early
    (an error, Ctrl-C), the tasks not started yet do nothing.
    """
    from dask.callbacks import Callback

    stop = threading.Event()
    completed: queue.SimpleQueue[Any] = queue.SimpleQueue()
    graph = [
        dask.delayed(_unless_stopped, pure=False)(stop, fn, job, warehouse_dir, registered)
        for fn, job in tasks
    ]
    keys = {item.key for item in graph}

    def posttask(key: Any, result: Any, *_: Any) -> None:
        if key in keys and result is not None:
            completed.put(result)

    def compute() -> None:
        try:
            with Callback(posttask=posttask):
                # the function, not the name "threads": a name makes Dask import distributed (0.1 s)
                dask.compute(*graph, scheduler=dask.threaded.get, num_workers=threads)
        except BaseException as exc:  # a bug outside the tasks' own guard: the driver raises it
            completed.put(exc)
        completed.put(None)

    helper = threading.Thread(target=compute, name="tracehouse-ingest-tasks", daemon=True)
    helper.start()
    try:
        while (item := _next(completed)) is not None:
            if isinstance(item, BaseException):
                raise item
            yield [item] if isinstance(item, FileOutcome) else []
    finally:
        stop.set()
        helper.join()


_NOTHING_YET = object()


def _next(completed: queue.SimpleQueue[Any]) -> Any:
    """The next completed item, or _NOTHING_YET after POLL_S with nothing."""
    try:
        return completed.get(timeout=POLL_S)
    except queue.Empty:
        return _NOTHING_YET


def _unless_stopped(
    stop: threading.Event,
    fn: Callable[..., FileOutcome],
    job: Any,
    warehouse_dir: str,
    registered: frozenset[str],
) -> FileOutcome | None:
    """One task, unless the ingest stopped before it started; a task that raised fails its file only."""
    if stop.is_set():
        return None
    try:
        return fn(job, warehouse_dir, registered)
    except Exception as exc:
        return _raised(fn, job, exc)


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
        return _raised(fn, job, exc)


def _raised(fn: Callable[..., FileOutcome], job: Any, exc: Exception) -> FileOutcome:
    """The outcome of a task that raised: its file fails, marked internal (TRACEHOUSE_DEBUG=1: raise it)."""
    if os.environ.get(DEBUG_VARIABLE) == "1":
        raise exc
    return failed_internally(KIND_OF_TASK[fn], job.path, exc)


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
    """Ingest traces (files or directories), the power logs their manifests list and nccl-tests output."""
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
    tasks: list[Task] = [
        *((load_trace, job) for job in found.traces),
        *((load_power, job) for job in found.power),
        *((load_nccl_tests, job) for job in found.nccl_tests),
    ]
    engine = (
        (IN_PROCESS, 1) if client is not None else local_engine([json_size(job.path) for _, job in tasks])
    )
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
        for group in run_tasks(tasks, str(warehouse), registered, client=client, engine=engine):
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
