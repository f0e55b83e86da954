"""Load discovered files into a warehouse: register the runs, run every task, register each outcome, refresh.

Workers hash, parse and write a file's Parquet partitions (temporary name, then rename; see
`tasks`); the driver alone touches DuckDB and registers each file's partitions and catalog row
in one transaction (see `register`), so a file's rows appear whole or not at all. It holds the
catalog read-write only in short phases (readers work in between) and the warehouse's ingest
lock throughout. Files whose content hash is already registered are skipped; Parquet files no
transaction registered (an interrupted ingest) are deleted at the start of the next ingest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracehouse.pipeline.discovery.jobs import Discovery
from tracehouse.pipeline.ingest.catalog import (
    clean_orphans,
    coverage_warnings,
    ingest_lock,
    mark_clean,
    register_run,
    registered_hashes,
)
from tracehouse.pipeline.ingest.register import Batch, Registrar, manifest_row
from tracehouse.pipeline.ingest.runner import Task, run_tasks
from tracehouse.pipeline.ingest.summary import IngestSummary
from tracehouse.pipeline.ingest.tasks import load_nccl_tests, load_power, load_trace
from tracehouse.pipeline.progress import Progress
from tracehouse.pipeline.warehouse import connect, create_views, create_warehouse


def load_all(
    found: Discovery,
    warehouse_dir: Path,
    *,
    summary: IngestSummary,
    reporter: Progress,
    client: Any,
    engine: tuple[str, int],
) -> None:
    """Create the warehouse if needed, then, holding its ingest lock, load every discovered file."""
    warehouse = create_warehouse(warehouse_dir).absolute()
    summary.warehouse = str(warehouse)
    with ingest_lock(warehouse):
        _load(found, warehouse, summary=summary, reporter=reporter, client=client, engine=engine)


def _load(
    found: Discovery,
    warehouse: Path,
    *,
    summary: IngestSummary,
    reporter: Progress,
    client: Any,
    engine: tuple[str, int],
) -> None:
    """Register the runs, run every task and register its outcome, then refresh the views."""
    tasks: list[Task] = [
        *((load_trace, job) for job in found.traces),
        *((load_power, job) for job in found.power),
        *((load_nccl_tests, job) for job in found.nccl_tests),
    ]
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
        groups = run_tasks(
            tasks, str(warehouse), registered, client=client, engine=engine, warn=summary.warnings.append
        )
        for group in groups:
            for outcome in group:
                reporter.file_read(outcome.path)
            registrar.add(group)
        registrar.finish(lambda connection: _refresh(connection, summary, batch.seen))
    except BaseException:
        registrar.abort()
        raise
    mark_clean(warehouse)


def _refresh(connection: Any, summary: IngestSummary, loaded: set[str]) -> None:
    """Bring the views up to date, then warn of every trace loaded now that has no breakdown."""
    create_views(connection)
    summary.warnings.extend(coverage_warnings(connection, loaded))
