"""Driver side of ingest: register each task's outcome in the catalog, or skip or fail it.

Only the driver touches DuckDB; each file's partitions and catalog row go in one transaction
(see `ingest_catalog.register_file`), so a file's rows appear whole or not at all.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracehouse.pipeline.discovery_jobs import RunSource
from tracehouse.pipeline.discovery_ranks import rank_claim_reason
from tracehouse.pipeline.ingest_catalog import record_error, register_file, unregister_trace
from tracehouse.pipeline.ingest_tasks import FileOutcome, hash_file
from tracehouse.pipeline.progress import Progress

if TYPE_CHECKING:  # ingest.py imports this module; the summary is only mutated here
    from tracehouse.pipeline.ingest import IngestSummary


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


class Batch:
    """The driver's bookkeeping while outcomes arrive: register, skip, or fail each file."""

    def __init__(
        self, connection: Any, warehouse_dir: Path, summary: IngestSummary, progress: Progress
    ) -> None:
        self.connection, self.warehouse_dir = connection, warehouse_dir
        self.summary, self.progress = summary, progress
        self.new: dict[str, int] = {}  # hashes registered by this ingest -> rows

    def fail(self, path: str, content_hash: str | None, reason: str) -> None:
        """Record a failed file in the catalog, the summary and the progress report."""
        record_error(self.connection, path, content_hash, reason)
        self.summary.failed.append((path, reason))
        self.progress.file_done(path, "failed", reason)

    def accept(self, outcome: FileOutcome) -> None:
        """Register, skip or fail one task's outcome."""
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
        if held_hash in self.new:
            unregister_trace(self.connection, self.warehouse_dir, held_hash)
            self.summary.loaded -= 1
            self.summary.events -= self.new.pop(held_hash)
            reason = rank_claim_reason(row["study"], row["run_id"], row["rank"], outcome.path)
            self.fail(held_path, held_hash, reason)
        reason = rank_claim_reason(row["study"], row["run_id"], row["rank"], held_path)
        self.fail(outcome.path, outcome.content_hash, reason)
        return True

    def _discard(self, outcome: FileOutcome) -> None:
        """Delete an outcome's Parquet files unless a registered file owns the same path."""
        for _, relative, _ in outcome.files:
            owned = self.connection.execute(
                "SELECT 1 FROM parquet_files WHERE path = ?", [relative]
            ).fetchall()
            if not owned:
                (self.warehouse_dir / relative).unlink(missing_ok=True)
