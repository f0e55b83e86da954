"""Load discovered files into a warehouse: register the runs, run every task, register each outcome, refresh.

Workers hash, parse and write a file's Parquet partitions (temporary name, then rename; see
`tasks`); the driver alone touches DuckDB and registers each file's partitions and catalog row
in one transaction (see `register`), so a file's rows appear whole or not at all. It holds the
catalog read-write only in short phases (readers work in between) and the warehouse's ingest
lock throughout. Files whose content hash is already registered are skipped; Parquet files no
transaction registered (an interrupted ingest) are deleted at the start of the next ingest.
"""

from __future__ import annotations

import itertools
import shutil
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.pipeline.discovery.jobs import Discovery
from tracehouse.pipeline.ingest.catalog import (
    CLEAN_NAME,
    catalog_phase,
    clean_orphans,
    coverage_warnings,
    faults_named,
    ingest_lock,
    mark_clean,
    register_run,
    registered_hashes,
    run_registered,
)
from tracehouse.pipeline.ingest.engine import IN_PROCESS
from tracehouse.pipeline.ingest.integrity import damaged_partitions
from tracehouse.pipeline.ingest.register import BUSY_WAIT_S, Batch, Registrar, manifest_row
from tracehouse.pipeline.ingest.runner import Task, run_tasks
from tracehouse.pipeline.ingest.summary import IngestSummary
from tracehouse.pipeline.ingest.tasks import FileOutcome, load_nccl_tests, load_power, load_trace
from tracehouse.pipeline.progress import Progress
from tracehouse.pipeline.warehouse.database import (
    create_views,
    create_warehouse,
    is_new_warehouse,
    make_warehouse_dir,
)
from tracehouse.pipeline.warehouse.partitions import PARQUET_DIR


def load_all(
    found: Discovery,
    warehouse_dir: Path,
    *,
    summary: IngestSummary,
    reporter: Progress,
    client: Any,
    engine: tuple[str, int],
) -> None:
    """Create the warehouse if needed, then, holding its ingest lock, load every discovered file.

    Into a new warehouse (no catalog, no Parquet folder: nothing registered, no orphans to clean)
    local tasks on a pool or threads start first and the catalog is created while they run (0.1 s
    of a new warehouse that the tasks would otherwise wait for).
    """
    began = time.perf_counter()
    warehouse = make_warehouse_dir(warehouse_dir).absolute()
    summary.warehouse = str(warehouse)
    with ingest_lock(warehouse), faults_named(warehouse):
        tasks: list[Task] = [
            *((load_trace, job) for job in found.traces),
            *((load_power, job) for job in found.power),
            *((load_nccl_tests, job) for job in found.nccl_tests),
        ]
        new = is_new_warehouse(warehouse)
        if new:  # a mark left in a folder emptied by hand would spare the next ingest its cleaning
            (warehouse / CLEAN_NAME).unlink(missing_ok=True)
        # new, local tasks on other threads or processes: they start now (none can be registered
        # yet) and run while the catalog is made; stopping them waits for the running ones
        early = new and client is None and engine[0] != IN_PROCESS
        groups, first = None, []
        if early:
            groups = run_tasks(tasks, str(warehouse), frozenset(), **_on(client, engine, summary))
        try:
            if groups is None:
                # a reader may have opened a new catalog as soon as it was copied into place; a
                # warehouse busy from the start is one line at once (register.BUSY_WAIT_S)
                create_warehouse(warehouse, wait_s=BUSY_WAIT_S if new else 0.0)
            else:
                first = next(groups, [])  # as soon as they are under way (usually empty)
                if not _created_beside(warehouse, groups):
                    groups, first = None, []
            batch = Batch(warehouse, summary, reporter, found.traces)
            registered = _catalog_phase(found, batch, reporter, len(tasks), clean=not new)
            summary.warnings.extend(power_failures(found))
            if groups is None:
                groups = run_tasks(tasks, str(warehouse), registered, **_on(client, engine, summary))
            summary.phase_s["catalog"] = time.perf_counter() - began
            _register(itertools.chain([first], groups), batch, reporter, summary)
        finally:
            if groups is not None:
                groups.close()  # on an error: no task starts any more, the running ones end
        mark_clean(warehouse)


def _created_beside(warehouse: Path, started: Generator[list[FileOutcome], None, None]) -> bool:
    """Create the catalog while the tasks run; False if the tasks had to be stopped to create it.

    Creating the raw views reads every partition on disk, so one the tasks wrote that the driver
    cannot read (a failing disk, say) fails it. Nothing is registered yet:
    the tasks stop, their partitions are deleted and the catalog is created alone; the caller runs
    the tasks again, and each partition is checked as it is registered (`partition_problem`).
    """
    try:
        create_warehouse(warehouse, wait_s=BUSY_WAIT_S)
        return True
    except WarehouseError:
        started.close()
        shutil.rmtree(warehouse / PARQUET_DIR, ignore_errors=True)
        create_warehouse(warehouse, wait_s=BUSY_WAIT_S)
        return False


def _on(client: Any, engine: tuple[str, int], summary: IngestSummary) -> dict[str, Any]:
    """run_tasks' options: where the tasks run, where its warnings go."""
    return {"client": client, "engine": engine, "warn": summary.warnings.append}


def power_failures(found: Discovery) -> list[str]:
    """One warning per run whose manifest says its power capture is incomplete."""
    return [
        f"{source.path or 'run'}: power capture of {m.study}/{m.run_id} is incomplete: {m.power.failure}"
        for source in found.runs
        if (m := source.manifest).power.failure
    ]


def _catalog_phase(
    found: Discovery, batch: Batch, reporter: Progress, n_tasks: int, *, clean: bool
) -> frozenset[str]:
    """Clean up after an interrupted ingest (unless new), register the runs; return the registered hashes."""
    # (waits for readers: one may have opened a new catalog as soon as it was made)
    with catalog_phase(batch.warehouse_dir, wait_s=BUSY_WAIT_S) as connection, batch.phase(connection):
        if clean:
            clean_orphans(connection, batch.warehouse_dir)
        with_files = {(job.study, job.run_id) for job in (*found.traces, *found.power)}
        for source in found.runs:
            key = (source.manifest.study, source.manifest.run_id)
            if key in with_files and not run_registered(connection, *key):
                batch.pending_runs[key] = manifest_row(source)  # registered with its first file
            else:
                register_run(connection, manifest_row(source))
        reporter.start(n_tasks + len(found.errors))
        for path, reason in found.errors:
            batch.fail_unread(path, reason)
        # a registered file whose partitions are damaged is parsed again, and repaired
        given = [str(job.path) for job in (*found.traces, *found.power)]
        damaged = damaged_partitions(connection, batch.warehouse_dir, deep=False, deep_sources=given)
        batch.damaged = {d.content_hash for d in damaged}
        return registered_hashes(connection) - batch.damaged


def _register(
    groups: Iterator[list[FileOutcome]], batch: Batch, reporter: Progress, summary: IngestSummary
) -> None:
    """Register each task's outcome as it comes, then refresh the views."""
    registrar = Registrar(batch, batch.warehouse_dir)
    began = time.perf_counter()
    try:
        for group in groups:
            for outcome in group:
                reporter.file_read(outcome.path)
            registrar.add(group)
        summary.phase_s["tasks"] = time.perf_counter() - began
        registrar.finish(lambda connection: _refresh(connection, summary, batch.seen))
    except BaseException:
        registrar.abort()
        raise


def _refresh(connection: Any, summary: IngestSummary, loaded: set[str]) -> None:
    """Bring the views up to date, then warn of every trace loaded now that has no breakdown."""
    create_views(connection)
    summary.warnings.extend(coverage_warnings(connection, loaded))
