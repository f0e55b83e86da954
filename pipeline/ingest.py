"""Ingest orchestration: discover files, parse each on Dask (one file = one task), register them.

Workers hash, parse and write a file's Parquet partitions (temporary name, then rename); the
driver alone touches DuckDB and registers each file's partitions and catalog row in one
transaction, so a file's rows appear whole or not at all. Files whose content hash is already
registered are skipped; Parquet files no transaction registered (an interrupted ingest) are
deleted at the start of the next ingest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import dask
import polars as pl
from dask.local import get_sync
from tracehouse.pipeline.discovery import PowerJob, RunSource, TraceJob, discover
from tracehouse.pipeline.errors import InputFileError, RankConflictError
from tracehouse.pipeline.parsers.trace_types import TraceMeta
from tracehouse.pipeline.progress import Progress, make_progress
from tracehouse.pipeline.warehouse import (
    PARQUET_TABLES,
    TRACE_TABLES,
    clean_orphans,
    connect,
    create_views,
    create_warehouse,
    partition_file,
    record_error,
    register_file,
    register_run,
    registered_hashes,
    unregister_trace,
)

# Below this many bytes in total (or for a single file) tasks run in-process. Measured on the
# 2-core dev machine under load: 40 files / 6.8 MB took 3.1 s in-process vs 7.3 s on a local
# 2-process pool; 8 files / 93 MB took 6.1 s vs 18.7 s (pool start-up, worker imports and
# contention for 2 cores). The pool pays off only on inputs that take tens of seconds.
POOL_MIN_BYTES = 256 * 1024 * 1024
HASH_CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True)
class FileOutcome:
    """What one task reports back to the driver (small and picklable)."""

    kind: str  # trace | power
    path: str
    status: str  # loaded | skipped | failed
    content_hash: str | None = None
    reason: str | None = None
    row: dict[str, Any] = field(default_factory=dict)  # the traces / power_files row
    files: tuple[tuple[str, str, int], ...] = ()  # (table, path relative to warehouse, rows)
    n_rows: int = 0  # events of a trace, samples of a power log


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


# ---------------------------------------------------------------- worker side


def hash_file(path: Path) -> tuple[int, str]:
    """Size in bytes and sha256 hex digest of a file."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def resolve_rank(job: TraceJob, meta: TraceMeta) -> tuple[int, str]:
    """The file's rank and where it came from; never a guess."""
    if job.rank is not None:
        if job.rank_source == "manifest" and meta.rank is not None and meta.rank != job.rank:
            raise RankConflictError(
                f"manifest.json says rank {job.rank} but distributedInfo.rank is {meta.rank}"
            )
        return job.rank, job.rank_source or "option"
    if meta.rank is not None:
        return meta.rank, "distributedInfo"
    raise RankConflictError(
        "no rank: the trace has no distributedInfo.rank; "
        "list it in manifest.json traces or pass --rank FILE=N"
    )


def write_partition(
    warehouse_dir: Path, table: str, frame: pl.DataFrame, keys: dict[str, Any]
) -> tuple[str, str, int] | None:
    """Write one table's rows of one file (keys added as columns) to its final Parquet name."""
    if frame.height == 0:
        return None
    columns = PARQUET_TABLES[table]
    missing = [c for c in columns if c not in keys and c not in frame.columns]
    if missing:
        raise ValueError(f"parser output for {table} lacks columns {', '.join(missing)}")
    out = frame.select(
        [pl.lit(value, dtype=columns[key]).alias(key) for key, value in keys.items()]
        + [pl.col(c).cast(t) for c, t in columns.items() if c not in keys]
    )
    relative = partition_file(
        table,
        study=keys["study"],
        run_id=keys["run_id"],
        rank=keys.get("rank"),
        content_hash=keys["content_hash"],
    )
    target = Path(warehouse_dir) / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex}")
    try:
        out.write_parquet(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return table, relative, out.height


def _write_all(warehouse_dir: Path, frames: dict[str, pl.DataFrame], keys: dict[str, Any]) -> tuple:
    written: list[tuple[str, str, int]] = []
    try:
        for table, frame in frames.items():
            entry = write_partition(warehouse_dir, table, frame, keys)
            if entry is not None:
                written.append(entry)
    except BaseException:
        for _, relative, _ in written:
            (Path(warehouse_dir) / relative).unlink(missing_ok=True)
        raise
    return tuple(written)


def _span(frame: pl.DataFrame) -> tuple[int | None, int | None]:
    if frame.height == 0:
        return None, None
    ends = frame["ts_unix_ns"] + frame["dur_ns"] if "dur_ns" in frame.columns else frame["ts_unix_ns"]
    return frame["ts_unix_ns"].min(), ends.max()


def _trace_row(job: TraceJob, parsed: Any, rank: int, source: str, size: int, content_hash: str) -> dict:
    meta: TraceMeta = parsed.meta
    first, last = _span(parsed.events)
    return {
        "content_hash": content_hash,
        "study": job.study,
        "run_id": job.run_id,
        "rank": rank,
        "rank_source": source,
        "path": str(job.path),
        "size_bytes": size,
        "n_events": parsed.events.height,
        "n_steps": parsed.steps.height,
        "n_collectives": parsed.collectives.height,
        "host": meta.host,
        "backend": meta.backend,
        "world_size": meta.world_size,
        "device_name": meta.device_names[0] if meta.device_names else None,
        "device_names": json.dumps(list(meta.device_names)),
        "base_time_ns": meta.base_time_ns,
        "ts_origin": meta.ts_origin,
        "layout": meta.layout,
        "schema_version": meta.schema_version,
        "negative_dur_events": meta.negative_dur_events,
        "first_ts_unix_ns": first,
        "last_ts_unix_ns": last,
        "distributed_info_json": meta.distributed_info_json,
    }


def _guarded(kind: str, path: Path, work: Callable[[], FileOutcome]) -> FileOutcome:
    """Run one file's work; any failure becomes a failed outcome with a one-line reason."""
    try:
        return work()
    except (InputFileError, RankConflictError) as exc:
        reason = exc.reason if isinstance(exc, InputFileError) else str(exc)
    except OSError as exc:
        reason = f"cannot read: {exc.strerror or exc}"
    except Exception as exc:  # one broken file must not stop the others; the reason names the cause
        reason = f"unexpected {type(exc).__name__}: {exc}"
    return FileOutcome(kind=kind, path=str(path), status="failed", reason=" ".join(reason.split()))


def load_trace(job: TraceJob, warehouse_dir: str, registered: frozenset[str]) -> FileOutcome:
    """Task: hash, parse and write one rank trace's partitions (unless already registered)."""
    state: dict[str, str] = {}

    def work() -> FileOutcome:
        from tracehouse.pipeline.parsers.kineto import parse_trace

        size, content_hash = hash_file(job.path)
        state["hash"] = content_hash
        if content_hash in registered:
            return FileOutcome(kind="trace", path=str(job.path), status="skipped", content_hash=content_hash)
        parsed = parse_trace(job.path)
        rank, source = resolve_rank(job, parsed.meta)
        keys = {"study": job.study, "run_id": job.run_id, "rank": rank, "content_hash": content_hash}
        frames = {t: getattr(parsed, t) for t in TRACE_TABLES}
        files = _write_all(Path(warehouse_dir), frames, keys)
        row = _trace_row(job, parsed, rank, source, size, content_hash)
        return FileOutcome(
            kind="trace",
            path=str(job.path),
            status="loaded",
            content_hash=content_hash,
            row=row,
            files=files,
            n_rows=parsed.events.height,
        )

    outcome = _guarded("trace", job.path, work)
    return dataclasses.replace(outcome, content_hash=state.get("hash"))


def load_power(job: PowerJob, warehouse_dir: str, registered: frozenset[str]) -> FileOutcome:
    """Task: hash, parse and write one power log's partition (unless already registered)."""
    state: dict[str, str] = {}

    def work() -> FileOutcome:
        from tracehouse.pipeline.parsers.power import parse_power_log

        size, content_hash = hash_file(job.path)
        state["hash"] = content_hash
        if content_hash in registered:
            return FileOutcome(kind="power", path=str(job.path), status="skipped", content_hash=content_hash)
        frame = parse_power_log(job.path, host=job.host)
        keys = {"study": job.study, "run_id": job.run_id, "content_hash": content_hash}
        files = _write_all(Path(warehouse_dir), {"power_samples": frame}, keys)
        first, last = _span(frame)
        sources = frame["source"].unique().sort().to_list() if frame.height else []
        hosts = frame["host"].drop_nulls().unique().sort().to_list() if frame.height else []
        row = {
            "content_hash": content_hash,
            "study": job.study,
            "run_id": job.run_id,
            "path": str(job.path),
            "size_bytes": size,
            "n_samples": frame.height,
            "host": job.host or ",".join(hosts) or None,
            "source": ",".join(s for s in sources if s) or None,
            "first_ts_unix_ns": first,
            "last_ts_unix_ns": last,
        }
        return FileOutcome(
            kind="power",
            path=str(job.path),
            status="loaded",
            content_hash=content_hash,
            row=row,
            files=files,
            n_rows=frame.height,
        )

    outcome = _guarded("power", job.path, work)
    return dataclasses.replace(outcome, content_hash=state.get("hash"))


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


# ---------------------------------------------------------------- driver side


def manifest_row(source: RunSource) -> dict[str, Any]:
    """The run_manifests row of a run: every manifest field, nested ones as JSON text."""
    row = dataclasses.asdict(source.manifest)
    for key, value in row.items():
        if isinstance(value, (dict, list)):
            row[key] = json.dumps(value, sort_keys=True)
    row["origin"] = "file" if source.path else "command-line"
    row["manifest_path"] = str(source.path) if source.path else None
    row["manifest_hash"] = hash_file(source.path)[1] if source.path else None
    row["ingested_at"] = datetime.now(timezone.utc)
    return row


class _Batch:
    """The driver's bookkeeping while outcomes arrive: register, skip, or fail each file."""

    def __init__(
        self, connection: Any, warehouse_dir: Path, summary: IngestSummary, progress: Progress
    ) -> None:
        self.connection, self.warehouse_dir = connection, warehouse_dir
        self.summary, self.progress = summary, progress
        self.new: dict[str, int] = {}  # hashes registered by this ingest -> rows

    def fail(self, path: str, content_hash: str | None, reason: str) -> None:
        record_error(self.connection, path, content_hash, reason)
        self.summary.failed.append((path, reason))
        self.progress.file_done(path, "failed", reason)

    def accept(self, outcome: FileOutcome) -> None:
        if outcome.status == "failed":
            self.fail(outcome.path, outcome.content_hash, outcome.reason or "failed")
        elif outcome.status == "skipped" or outcome.content_hash in self.new:
            self._discard(outcome)
            self.summary.skipped += 1
            self.progress.file_done(outcome.path, "skipped", "already in the warehouse")
        elif outcome.kind == "trace" and self._rank_taken(outcome):
            self._discard(outcome)
        else:
            self._register(outcome)

    def _register(self, outcome: FileOutcome) -> None:
        row = {**outcome.row, "ingested_at": datetime.now(timezone.utc)}
        register_file(
            self.connection, "traces" if outcome.kind == "trace" else "power_files", row, list(outcome.files)
        )
        self.new[outcome.content_hash or ""] = outcome.n_rows
        if outcome.kind == "trace":
            self.summary.loaded += 1
            self.summary.events += outcome.n_rows
        else:
            self.summary.power_files += 1
        unit = "events" if outcome.kind == "trace" else "power samples"
        self.progress.file_done(outcome.path, "loaded", f"{outcome.n_rows} {unit}")

    def _rank_taken(self, outcome: FileOutcome) -> bool:
        """Two files claiming one rank: the new one fails; one loaded by this ingest fails too."""
        row = outcome.row
        holder = self.connection.execute(
            "SELECT content_hash, path FROM traces WHERE study = ? AND run_id = ? AND rank = ?",
            [row["study"], row["run_id"], row["rank"]],
        ).fetchall()
        if not holder:
            return False
        held_hash, held_path = holder[0]
        what = f"rank {row['rank']} of run {row['study']}/{row['run_id']} is also claimed by"
        if held_hash in self.new:
            unregister_trace(self.connection, self.warehouse_dir, held_hash)
            self.summary.loaded -= 1
            self.summary.events -= self.new.pop(held_hash)
            self.fail(held_path, held_hash, f"{what} {outcome.path}")
        self.fail(outcome.path, outcome.content_hash, f"{what} {held_path}")
        return True

    def _discard(self, outcome: FileOutcome) -> None:
        """Delete an outcome's Parquet files unless a registered file owns the same path."""
        for _, relative, _ in outcome.files:
            owned = self.connection.execute(
                "SELECT 1 FROM parquet_files WHERE path = ?", [relative]
            ).fetchall()
            if not owned:
                (self.warehouse_dir / relative).unlink(missing_ok=True)


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
        batch = _Batch(connection, warehouse, summary, reporter)
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
