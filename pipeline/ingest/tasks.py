"""Worker side of ingest: one task per source file hashes, parses and writes its Parquet partitions.

Tasks never touch DuckDB; they return a small `FileOutcome` that the driver registers. The
points of an nccl-tests file (tens of rows) travel in the outcome itself, for a DuckDB table. Whatever
goes wrong with one file fails that file only, so one odd file never costs the batch: a bad
input with its one-line reason, anything else as an internal error (a tracehouse bug, marked so
that it is not mistaken for bad input, named with the place it was raised so a user can report
it). With TRACEHOUSE_DEBUG=1 a bug is raised instead, for its traceback.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from tracehouse.pipeline.common.errors import (
    DEBUG_VARIABLE,
    InputFileError,
    RankConflictError,
    one_line,
    system_fault,
)
from tracehouse.pipeline.discovery.jobs import NcclTestsJob, PowerJob, TraceJob
from tracehouse.pipeline.discovery.locations import local_copy
from tracehouse.pipeline.discovery.ranks import RANK_OPTION, RANK_OPTION_FORM
from tracehouse.pipeline.ingest.lifeline import tie_to
from tracehouse.pipeline.ingest.parquet import delete_partitions, write_all
from tracehouse.pipeline.parsers.kineto.events import GPU_KINDS
from tracehouse.pipeline.parsers.kineto.parsed import TraceMeta
from tracehouse.pipeline.parsers.nccl_tests.result import NcclTestsResult
from tracehouse.pipeline.warehouse.partitions import TRACE_TABLES, Partition
from tracehouse.pipeline.warehouse.schema import IGNORED_CATEGORIES, OTHER_KIND

HASH_CHUNK = 1 << 20
# rank_source of a run's only trace without distributedInfo: a process without a distributed world.
SINGLE_PROCESS = "single-process"

# The kind of an nccl-tests task, and the source its network_files and network_curve_points rows name.
NCCL_TESTS = "nccl-tests"

# How an internal error's reason begins (ingest_errors.reason, the terminal, --json).
INTERNAL_PREFIX = "internal error (a tracehouse bug, not a fault of the file; please report this line): "


@dataclass(frozen=True, kw_only=True)
class FileOutcome:
    """What one task reports back to the driver (small and picklable)."""

    kind: str  # trace | power | nccl-tests
    path: str
    status: str  # loaded | skipped | failed
    content_hash: str | None = None
    reason: str | None = None
    internal: bool = False  # failed by a tracehouse bug, not by its input
    row: dict[str, Any] = field(default_factory=dict)  # the traces / power_files / network_files row
    files: tuple[Partition, ...] = ()  # the partitions written
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)  # rows for DuckDB tables, by table
    n_rows: int = 0  # events of a trace, samples of a power log, points of an nccl-tests file
    warnings: tuple[str, ...] = ()  # one line each, about a file that loaded
    warehouse_fault: bool = False  # its partitions could not be written (disk full, read-only): stop


class WarehouseWriteFault(Exception):
    """A file's partitions could not be written for a reason of the system (`errors.system_fault`)."""


@dataclass(frozen=True, kw_only=True)
class Parsed:
    """One file's parser output: frames per table, key columns, row count and its catalog row."""

    frames: dict[str, pl.DataFrame]  # Parquet tables
    keys: dict[str, Any]
    n_rows: int
    row: Callable[[], dict[str, Any]]  # called after the writes, which report missing columns first
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)  # DuckDB tables, inserted on registering
    warnings: tuple[str, ...] = ()
    # Parquet tables written even without rows: a partition that says "computed, none" (a trace
    # with host ops but no cpu_op has an empty op_calls partition, so no refresh computes it again)
    keep_empty: frozenset[str] = frozenset()


def hash_file(path: Path) -> tuple[int, str]:
    """Size in bytes and sha256 hex digest of a file."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:  # a local file, or a store's object (a manifest read by the driver)
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def resolve_rank(job: TraceJob, meta: TraceMeta) -> tuple[int, str]:
    """The file's rank and where it came from; never a guess."""
    if job.rank is not None:
        said_by = "manifest.json" if job.rank_source == "manifest" else RANK_OPTION
        if meta.rank is not None and meta.rank != job.rank:
            raise RankConflictError(f"{said_by} says rank {job.rank} but distributedInfo.rank is {meta.rank}")
        return job.rank, job.rank_source or "option"
    if meta.rank is not None:
        return meta.rank, "distributedInfo"
    if job.single_process:
        return 0, SINGLE_PROCESS
    raise RankConflictError(
        "no rank: the trace has no distributedInfo.rank; "
        f"list it in manifest.json traces or pass {RANK_OPTION_FORM}"
    )


def load_trace(job: TraceJob, warehouse_dir: str, registered: frozenset[str]) -> FileOutcome:
    """Task: hash, parse and write one rank trace's partitions (unless already registered)."""

    def parse(local: Path, size: int, content_hash: str) -> Parsed:
        from tracehouse.pipeline.parsers.kineto.parse import parse_trace

        parsed = parse_trace(local)
        rank, source = resolve_rank(job, parsed.meta)
        return Parsed(
            frames={t: getattr(parsed, t) for t in TRACE_TABLES},
            keys={"study": job.study, "run_id": job.run_id, "rank": rank, "content_hash": content_hash},
            n_rows=parsed.events.height,
            row=lambda: _trace_row(job, parsed, rank, source, size, content_hash),
            keep_empty=frozenset({"op_calls"}) if parsed.ops.height else frozenset(),
        )

    return _load("trace", job.path, warehouse_dir, registered, parse)


def load_power(job: PowerJob, warehouse_dir: str, registered: frozenset[str]) -> FileOutcome:
    """Task: hash, parse and write one power log's partition (unless already registered)."""

    def parse(local: Path, size: int, content_hash: str) -> Parsed:
        from tracehouse.pipeline.parsers.power.parse import read_power_log

        log = read_power_log(local, host=job.host)
        frame = log.frame
        return Parsed(
            frames={"power_samples": frame},
            keys={"study": job.study, "run_id": job.run_id, "content_hash": content_hash},
            n_rows=frame.height,
            row=lambda: _power_row(job, frame, size, content_hash),
            warnings=tuple(f"{job.path}: {line}; its other samples are loaded" for line in log.dropped),
        )

    return _load("power", job.path, warehouse_dir, registered, parse)


def load_nccl_tests(job: NcclTestsJob, warehouse_dir: str, registered: frozenset[str]) -> FileOutcome:
    """Task: hash and parse one nccl-tests output file (its points go to the driver in the outcome)."""

    def parse(local: Path, size: int, content_hash: str) -> Parsed:
        from tracehouse.pipeline.parsers.nccl_tests.parse import parse_nccl_tests

        result = parse_nccl_tests(local)
        keys = {
            "content_hash": content_hash,
            "study": job.study,
            "path": str(job.path),
            "source": NCCL_TESTS,
        }
        points = result.frame()
        points = points.select(
            [pl.lit(v, dtype=pl.String).alias(k) for k, v in keys.items()] + points.columns
        )
        failures = result.failures()
        return Parsed(
            frames={},
            keys=keys,
            n_rows=points.height,
            row=lambda: _nccl_tests_row(result, keys, size, failures),
            tables={"network_curve_points": points},
            warnings=tuple(
                f"{job.path}: {line}; its other results are loaded"
                for line in failures + result.dropped_lines()
            ),
        )

    return _load(NCCL_TESTS, job.path, warehouse_dir, registered, parse)


def _load(
    kind: str,
    path: Path,
    warehouse_dir: str,
    registered: frozenset[str],
    parse: Callable[[Path, int, str], Parsed],
) -> FileOutcome:
    """Hash a file, skip it if registered, else parse it and write its partitions.

    A stored object (`s3://...`) is read once, here on the worker, into a scratch file that the
    hash and the parser read (`local_copy`); the outcome names the object, as the user gave it.
    """
    state: dict[str, str] = {}

    def work() -> FileOutcome:
        with local_copy(path) as local:
            return read(local)

    def read(local: Path) -> FileOutcome:
        size, content_hash = hash_file(local)
        state["hash"] = content_hash
        if content_hash in registered:
            return FileOutcome(kind=kind, path=str(path), status="skipped", content_hash=content_hash)
        parsed = parse(local, size, content_hash)
        try:
            files = write_all(Path(warehouse_dir), parsed.frames, parsed.keys, keep_empty=parsed.keep_empty)
        except Exception as exc:
            if (fault := system_fault(exc)) is not None:
                raise WarehouseWriteFault(
                    f"cannot write its partitions into {warehouse_dir}: {fault}"
                ) from exc
            raise
        try:
            row = parsed.row()
        except BaseException:
            delete_partitions(Path(warehouse_dir), files)
            raise
        return FileOutcome(
            kind=kind,
            path=str(path),
            status="loaded",
            content_hash=content_hash,
            row=row,
            files=files,
            tables=parsed.tables,
            n_rows=parsed.n_rows,
            warnings=parsed.warnings,
        )

    outcome = _guarded(kind, path, work)
    return dataclasses.replace(outcome, content_hash=state.get("hash"))


def _guarded(kind: str, path: Path, work: Callable[[], FileOutcome]) -> FileOutcome:
    """Run one file's work; whatever goes wrong fails this file only (a bug marked as internal)."""
    try:
        return work()
    except (InputFileError, RankConflictError) as exc:
        reason = exc.reason if isinstance(exc, InputFileError) else str(exc)
    except WarehouseWriteFault as exc:
        return FileOutcome(kind=kind, path=str(path), status="failed", reason=str(exc), warehouse_fault=True)
    except OSError as exc:
        reason = f"cannot read: {read_problem(exc)}"
    except Exception as exc:
        if os.environ.get(DEBUG_VARIABLE) == "1":
            raise
        return failed_internally(kind, path, exc)
    return FileOutcome(kind=kind, path=str(path), status="failed", reason=one_line(reason))


def read_problem(exc: OSError) -> str:
    """Why a file or a store's object could not be read, in the system's or the store's words (a
    store's missing object says only its key: `not found (bucket/key)`)."""
    if exc.strerror:
        return exc.strerror
    if isinstance(exc, FileNotFoundError):
        return f"not found ({exc})"
    return str(exc)


def raised_outcome(kind: str, path: Path | str, exc: Exception) -> FileOutcome:
    """The outcome of a task that raised: its file fails, marked internal (TRACEHOUSE_DEBUG=1: raise it)."""
    if os.environ.get(DEBUG_VARIABLE) == "1":
        raise exc
    return failed_internally(kind, path, exc)


# A pool worker's copy of the content hashes registered when the ingest began (`prepare_worker`):
# sent once per worker process, not with every task.
_registered: frozenset[str] = frozenset()


def prepare_worker(hashes: frozenset[str], environment: dict[str, str], driver_pid: int) -> None:
    """Pool worker initializer: keep the registered content hashes, take the driver's environment, die
    with it.

    A worker forks from a server started earlier, perhaps before the driver changed its environment
    (a notebook, a test): the tasks read TRACEHOUSE_* settings and a store's credentials and endpoint
    (`AWS_*`, ...) from it, so its environment is made the driver's at this ingest.
    """
    global _registered
    tie_to(driver_pid)
    _registered = hashes
    for key in [key for key in os.environ if key not in environment]:
        del os.environ[key]
    os.environ.update(environment)


def guarded_task(
    fn: Callable[..., FileOutcome], kind: str, job: Any, warehouse_dir: str, registered: frozenset[str]
) -> FileOutcome:
    """One task; if it raised (a bug outside the file's own guard), its file fails, marked internal."""
    try:
        return fn(job, warehouse_dir, registered)
    except Exception as exc:
        return raised_outcome(kind, job.path, exc)


def in_pool_worker(fn: Callable[..., FileOutcome], kind: str, job: Any, warehouse_dir: str) -> FileOutcome:
    """One task on a pool worker, with the worker's registered hashes (`guarded_task`)."""
    return guarded_task(fn, kind, job, warehouse_dir, _registered)


def failed_internally(kind: str, path: Path | str, exc: BaseException) -> FileOutcome:
    """The outcome of a file whose work met a tracehouse bug."""
    return FileOutcome(
        kind=kind, path=str(path), status="failed", reason=INTERNAL_PREFIX + bug_detail(exc), internal=True
    )


def bug_detail(exc: BaseException) -> str:
    """One line naming an exception and the innermost place it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return one_line(f"{type(exc).__name__}: {exc}{where}")


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
        "decoder": meta.decoder,
        "utf8_replaced": meta.utf8_replaced,
        **coverage_facts(parsed.events),
        **op_facts(parsed),
    }


def coverage_facts(events: pl.DataFrame) -> dict[str, Any]:
    """What decides whether a trace can have a breakdown: its device events and unknown categories."""
    device = events.filter(pl.col("kind").is_in(GPU_KINDS))
    streamless = device["stream"].null_count()
    unknown = (
        events.filter((pl.col("kind") == OTHER_KIND) & ~pl.col("cat").is_in(list(IGNORED_CATEGORIES)))
        .group_by("cat")
        .len()
        .sort("cat", nulls_last=True)
    )
    return {
        "n_device_events": device.height - streamless,
        "n_streamless_device_events": streamless,
        "unknown_categories": json.dumps(
            {"(no category)" if cat is None else cat: n for cat, n in unknown.iter_rows()}
        ),
    }


def op_facts(parsed: Any) -> dict[str, int]:
    """What the op-level views can use: ops (with shapes, in modules), linked GPU events, memory events."""
    ops, launches = parsed.ops, parsed.op_launches
    return {
        "n_ops": ops.height,
        "n_ops_with_shapes": ops.height - ops["input_dims"].null_count(),
        "n_ops_in_modules": ops.height - ops["module"].null_count(),
        "n_op_launches": launches.height,
        "n_linked_launches": launches.height - launches["op_id"].null_count(),
        "n_memory_events": parsed.memory_events.height,
    }


def _power_row(job: PowerJob, frame: pl.DataFrame, size: int, content_hash: str) -> dict:
    first, last = _span(frame)
    sources = frame["source"].unique().sort().to_list() if frame.height else []
    hosts = frame["host"].drop_nulls().unique().sort().to_list() if frame.height else []
    return {
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


def _nccl_tests_row(result: NcclTestsResult, keys: dict[str, str], size: int, failures: list[str]) -> dict:
    programs = dict.fromkeys(test.program for test in result.tests if test.program)
    return {
        **keys,
        "size_bytes": size,
        "n_tests": len(result.tests),
        "n_points": result.n_points,
        "programs": ",".join(programs) or None,
        "failures": json.dumps(failures),
    }
