"""Driver side of ingest: register each task's outcome in the catalog, or skip or fail it, once.

Only the driver touches DuckDB; each file's partitions and catalog row go in one transaction
(see `ingest_catalog.register_file`), so a file's rows appear whole or not at all. Outcomes
are registered in short read-write phases (`Registrar`), so queries can open the warehouse
while the tasks run.

A trace's rank is often known only once it is parsed, so a rank claim is settled only when no
unfinished task of its run may still claim that rank. Until then the file is registered (an
interrupted ingest keeps it) but not reported; a second claim unregisters it, and when the
rank settles every claimant fails, naming the others. So the outcome does not depend on the
order the tasks finish in, and each file is counted once.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tracehouse.pipeline.common.errors import WarehouseError, one_line
from tracehouse.pipeline.discovery.jobs import RunSource, TraceJob
from tracehouse.pipeline.discovery.locations import scheme_of
from tracehouse.pipeline.discovery.ranks import rank_claim_reason
from tracehouse.pipeline.ingest.catalog import (
    catalog_phase,
    clear_errors,
    forget_file,
    open_catalog,
    partition_problem,
    rank_holder,
    record_error,
    register_file,
    unregister_trace,
)
from tracehouse.pipeline.ingest.summary import IngestSummary
from tracehouse.pipeline.ingest.tasks import NCCL_TESTS, FileOutcome, hash_file
from tracehouse.pipeline.progress import Progress

# Per task kind: the catalog table its file is registered in, and what its rows are called.
REGISTERS = {"trace": "traces", "power": "power_files", NCCL_TESTS: "network_files"}
UNITS = {"trace": "events", "power": "power samples", NCCL_TESTS: "curve points"}

Run = tuple[str, str]  # study, run_id
Key = tuple[str, str, int]  # study, run_id, rank

# While tasks run, at most one catalog phase every this many seconds (the first outcome at once):
# each phase opens the DuckDB file (tens of ms), and readers can open it only between phases.
REGISTER_GAP_S = 0.5
# How long the last phase waits for readers (queries, reports) to let the catalog go; the first
# one waits for nothing: a warehouse busy from the start is one line at once, before any parse.
BUSY_WAIT_S = 120.0
# How long an ingest stopping on an error waits to roll back its unsettled files.
ABORT_WAIT_S = 5.0


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


def readable_hash(path: str) -> str | None:
    """The content hash of a path that is a readable local file, else None (the driver never reads a
    whole object of a store: its failure is recorded without a hash)."""
    if scheme_of(path) is not None:
        return None
    try:
        return hash_file(Path(path))[1] if Path(path).is_file() else None
    except OSError:
        return None


class OpenTasks:
    """The trace tasks not back yet, counted by what they may claim: one known rank, or any of their run."""

    def __init__(self, jobs: Iterable[TraceJob]) -> None:
        self.jobs = {str(job.path): job for job in jobs}
        self.any_rank: Counter[Run] = Counter()
        self.rank: Counter[Key] = Counter()
        for job in self.jobs.values():
            if job.rank is None:
                self.any_rank[(job.study, job.run_id)] += 1
            else:
                self.rank[(job.study, job.run_id, job.rank)] += 1

    def finish(self, path: str) -> TraceJob | None:
        """Mark a trace task back and return its job (None if it was not open)."""
        job = self.jobs.pop(path, None)
        if job is not None and job.rank is None:
            self.any_rank[(job.study, job.run_id)] -= 1
        elif job is not None:
            self.rank[(job.study, job.run_id, job.rank)] -= 1
        return job

    def may_claim(self, key: Key) -> bool:
        """Whether a task not back yet may still claim this rank."""
        return self.any_rank[key[:2]] > 0 or self.rank[key] > 0


class Batch:
    """The driver's bookkeeping while outcomes arrive: register, skip, or fail each file once."""

    def __init__(
        self, warehouse_dir: Path, summary: IngestSummary, progress: Progress, traces: Iterable[TraceJob]
    ) -> None:
        self._connection: Any = None  # the read-write connection of the current catalog phase
        self.warehouse_dir = warehouse_dir
        self.summary, self.progress = summary, progress
        self.open = OpenTasks(traces)
        self.claims: dict[Run, dict[int, list[FileOutcome]]] = {}  # unsettled rank claims
        self.seen: set[str] = set()  # content hashes this ingest registered or claimed a rank with
        self.changed_runs: set[tuple[Any, Any]] = set()  # runs a file was registered into
        self.pending_runs: dict[Run, dict[str, Any]] = {}  # new runs' rows, registered with their first file
        self.damaged: set[str] = set()  # registered files whose partitions are damaged: parsed again
        self.repaired: set[str] = set()  # of those, the ones this ingest wrote again

    @contextmanager
    def phase(self, connection: Any) -> Iterator[None]:
        """One catalog phase: the block's catalog writes go through this read-write connection."""
        self._connection = connection
        try:
            yield
        finally:
            self._connection = None

    def fail(self, path: str, content_hash: str | None, reason: str, *, internal: bool = False) -> None:
        """Record a failed file in the catalog, the summary and the progress report."""
        reason = one_line(reason)
        record_error(self._connection, path, content_hash, reason, internal=internal)
        self.summary.failed.append((path, reason))
        if internal:
            self.summary.internal_errors.append(path)
        self.progress.file_done(path, "failed", reason)

    def fail_unread(self, path: str, reason: str) -> None:
        """Fail a file before any task read it, recording its content hash when it is readable."""
        self.fail(path, readable_hash(path), reason)

    def accept(self, outcome: FileOutcome) -> None:
        """Register, skip or fail one task's outcome, then settle the rank claims it may free."""
        job = self.open.finish(outcome.path) if outcome.kind == "trace" else None
        if outcome.warehouse_fault:  # the disk or the folder, not the file: every other file would fail too
            raise WarehouseError(
                f"{outcome.path}: {outcome.reason}; the files registered before are kept, "
                "nothing half-written is: fix that, then run the same ingest again"
            )
        if outcome.status == "loaded" and outcome.content_hash in self.damaged:
            forget_file(self._connection, outcome.content_hash or "")  # its new partitions replace them
            self.damaged.discard(outcome.content_hash or "")
            self.repaired.add(outcome.content_hash or "")
        if outcome.status == "failed":
            self.fail(
                outcome.path, outcome.content_hash, outcome.reason or "failed", internal=outcome.internal
            )
        elif outcome.status == "skipped" or outcome.content_hash in self.seen:
            self._skip(outcome)
        elif (problem := partition_problem(self._connection, self.warehouse_dir, outcome.files)) is not None:
            self._discard(outcome)
            self.fail(outcome.path, outcome.content_hash, problem)
        elif outcome.kind == "trace":
            self._claim(outcome)
        else:
            self._register(outcome)
            self._report_loaded(outcome)
        if job is not None:
            self._settle(job)

    def finish(self) -> None:
        """Settle every claim still open (every task is back)."""
        for run, ranks in self.claims.items():
            for rank, claims in sorted(ranks.items()):
                self._close((*run, rank), claims)
        self.claims.clear()

    def abort(self) -> None:
        """Unregister the files whose rank claim is not settled (the ingest stops half-way)."""
        for ranks in self.claims.values():
            for claims in ranks.values():
                if len(claims) == 1:
                    unregister_trace(self._connection, self.warehouse_dir, claims[0].content_hash or "")
        self.claims.clear()

    def _claim(self, outcome: FileOutcome) -> None:
        """Claim a trace's rank: registered while it is the only claim, failed if an earlier ingest holds it.

        A rank held by a file an earlier ingest registered stays with that file (even when that
        file is part of this batch and was skipped): the newcomer fails, naming it.
        """
        row = outcome.row
        key: Key = (row["study"], row["run_id"], row["rank"])
        holder = rank_holder(self._connection, *key)
        if holder is not None and holder[0] not in self.seen:
            self._discard(outcome)
            self.fail(outcome.path, outcome.content_hash, rank_claim_reason(*key, holder[1]))
            return
        self.seen.add(outcome.content_hash or "")
        claims = self.claims.setdefault(key[:2], {}).setdefault(key[2], [])
        claims.append(outcome)
        if len(claims) == 1:
            self._register(outcome)
            return
        if len(claims) == 2:
            unregister_trace(self._connection, self.warehouse_dir, claims[0].content_hash or "")
        self._discard(outcome)

    def _settle(self, job: TraceJob) -> None:
        """Close the claims of the job's run that no task still out may contest."""
        run = (job.study, job.run_id)
        ranks = self.claims.get(run)
        if not ranks or self.open.any_rank[run] > 0:
            return
        for rank in list(ranks) if job.rank is None else [job.rank]:
            if rank in ranks and not self.open.may_claim((*run, rank)):
                self._close((*run, rank), ranks.pop(rank))
        if not ranks:
            del self.claims[run]

    def _close(self, key: Key, claims: list[FileOutcome]) -> None:
        """Report a settled rank: its only claimant loaded, or every claimant failed naming the others."""
        if len(claims) == 1:
            self._report_loaded(claims[0])
            return
        paths = sorted(c.path for c in claims)
        for claim in sorted(claims, key=lambda c: c.path):
            others = ", ".join(p for p in paths if p != claim.path)
            self.fail(claim.path, claim.content_hash, rank_claim_reason(*key, others))

    def _register(self, outcome: FileOutcome) -> None:
        row = {**outcome.row, "ingested_at": datetime.now(timezone.utc)}
        run = (row.get("study"), row.get("run_id"))
        run_row = self.pending_runs.get(run)
        register_file(
            self._connection,
            REGISTERS[outcome.kind],
            row,
            list(outcome.files),
            outcome.tables,
            run_row,
            warnings=outcome.warnings,
        )
        self.pending_runs.pop(run, None)
        self.seen.add(outcome.content_hash or "")
        if run[1] is not None:  # a run's file (an nccl-tests file belongs to a study only)
            self.changed_runs.add(run)
            self.summary.runs_refreshed = len(self.changed_runs)

    def _report_loaded(self, outcome: FileOutcome) -> None:
        if outcome.content_hash in self.repaired:
            self.summary.repaired.append(outcome.path)
            self.summary.warnings.extend(outcome.warnings)
            self.progress.file_done(outcome.path, "repaired", "its damaged partitions written again")
            return
        if outcome.kind == "trace":
            self.summary.loaded += 1
            self.summary.events += outcome.n_rows
        elif outcome.kind == NCCL_TESTS:
            self.summary.nccl_tests_files += 1
        else:
            self.summary.power_files += 1
        self.summary.warnings.extend(outcome.warnings)
        self.progress.file_done(outcome.path, "loaded", f"{outcome.n_rows} {UNITS[outcome.kind]}")

    def _skip(self, outcome: FileOutcome) -> None:
        """A file whose content is already in the warehouse: its earlier failures are forgotten."""
        self._discard(outcome)
        clear_errors(self._connection, outcome.path)
        self.summary.skipped += 1
        self.progress.file_done(outcome.path, "skipped", "already in the warehouse")

    def _discard(self, outcome: FileOutcome) -> None:
        """Delete an outcome's Parquet files unless a registered file owns the same path."""
        for relative in (p.path for p in outcome.files):
            owned = self._connection.execute(
                "SELECT 1 FROM parquet_files WHERE path = ?", [relative]
            ).fetchall()
            if not owned:
                (self.warehouse_dir / relative).unlink(missing_ok=True)


class Registrar:
    """Hands outcomes to the batch in short read-write phases, so readers can open the warehouse in between.

    A phase that finds readers holding the file is tried again with the next outcomes; the last
    phase waits for them.
    """

    def __init__(self, batch: Batch, warehouse_dir: Path) -> None:
        self.batch, self.warehouse_dir = batch, warehouse_dir
        self.queue: list[FileOutcome] = []
        self.last: float | None = None  # when the last registering phase ended

    def add(self, outcomes: list[FileOutcome]) -> None:
        """Queue outcomes; register the queue now if a phase is due and the catalog is free."""
        self.queue.extend(outcomes)
        due = self.last is None or time.monotonic() - self.last >= REGISTER_GAP_S
        if not self.queue or not due:
            return
        connection = open_catalog(self.warehouse_dir, wait_s=0)
        if connection is not None:
            with connection:
                self._drain(connection)

    def finish(self, finalize: Callable[[Any], None]) -> None:
        """In one last phase (waiting for readers): register the queue, settle every claim, run finalize."""
        with catalog_phase(self.warehouse_dir, wait_s=BUSY_WAIT_S) as connection:
            self._drain(connection)
            with self.batch.phase(connection), self._cpu("register"):
                self.batch.finish()
            with self._cpu("refresh"):
                finalize(connection)

    def abort(self) -> None:
        """Unregister the files whose rank claim is unsettled (unless the catalog stays busy, as a kill)."""
        connection = open_catalog(self.warehouse_dir, wait_s=ABORT_WAIT_S)
        if connection is not None:
            with connection, self.batch.phase(connection):
                self.batch.abort()

    def _drain(self, connection: Any) -> None:
        queue, self.queue = self.queue, []
        with self.batch.phase(connection), self._cpu("register"):
            for outcome in queue:
                self.batch.accept(outcome)
        self.last = time.monotonic()

    @contextmanager
    def _cpu(self, phase: str) -> Iterator[None]:
        """Add the process's CPU seconds and the wall seconds spent in the block to the summary's
        `driver_cpu_s[phase]` and `phase_s[phase]`."""
        started, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.batch.summary.driver_cpu_s[phase] += time.process_time() - cpu
            self.batch.summary.phase_s[phase] += time.perf_counter() - started
