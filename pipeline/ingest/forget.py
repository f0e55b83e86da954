"""`tracehouse forget RUN`: remove a run from a warehouse in one transaction, then its Parquet files.

Its catalog rows (traces, power logs, their partitions' rows, the manifest), its projections and
every projection check it is part of, its study's interference fit and its rows of every
materialized table go together: a reader sees the run whole or not at all.
The Parquet files are deleted once that has committed; an interruption between the two leaves
only unregistered files, which the next ingest deletes as orphans.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.pipeline.ingest.catalog import catalog_phase, faults_named, ingest_lock
from tracehouse.pipeline.ingest.register import BUSY_WAIT_S
from tracehouse.pipeline.warehouse.database import connect, refresh_runs_now, transaction
from tracehouse.pipeline.warehouse.meta import has_relation

# The catalog tables that hold a run's rows, keyed by (study, run_id).
RUN_TABLES = (
    "traces",
    "power_files",
    "run_manifests",
    "projections",
    "critical_path_segments",
    "op_slack_rows",
    "op_calls_healed",
)
# Tables keyed by study whose rows rest on every run of it (the interference fit of
# `tracehouse project`): forgetting one run drops the study's rows (the next projection refits).
STUDY_TABLES = ("interference_fits",)
# Tables whose rows rest on two runs, the projected one and the one measured (projection checks).
PAIR_TABLES = ("projection_checks",)
# The content hashes of a run's files that have partitions (parameters: study, run_id twice).
_RUN_HASHES = (
    "SELECT content_hash FROM traces WHERE study = ? AND run_id = ? "
    "UNION ALL SELECT content_hash FROM power_files WHERE study = ? AND run_id = ?"
)


@dataclass(frozen=True, kw_only=True)
class Forgotten:
    """What `forget_run` removed."""

    study: str
    run_id: str
    traces: int
    power_logs: int
    partitions: int

    def line(self) -> str:
        """One line for the terminal."""
        return (
            f"forgot run {self.study}/{self.run_id}: {self.traces} traces, {self.power_logs} power logs, "
            f"{self.partitions} Parquet files"
        )


def forget_run(warehouse_dir: str | Path, run_id: str, *, study: str | None = None) -> Forgotten:
    """Remove one run (catalog rows, partitions, materialized rows); WarehouseError if there is none."""
    warehouse = Path(warehouse_dir)
    connect(warehouse, read_only=True).close()  # no warehouse there: the usual one line, before any lock file
    with ingest_lock(warehouse), faults_named(warehouse), catalog_phase(warehouse, wait_s=BUSY_WAIT_S) as con:
        chosen = _study_of(con, warehouse, run_id, study)
        key = [chosen, run_id]
        partitions = f"FROM parquet_files WHERE content_hash IN ({_RUN_HASHES})"
        paths = [p for (p,) in con.execute(f"SELECT path {partitions}", key * 2).fetchall()]
        counts = [_count(con, table, key) for table in ("traces", "power_files")]
        with transaction(con, checkpoint=True):
            # the warnings of its files go with them (dropped samples, failed tests)
            con.execute(
                f"DELETE FROM ingest_errors WHERE severity = 'warning' AND content_hash IN ({_RUN_HASHES})",
                key * 2,
            )
            con.execute(f"DELETE {partitions}", key * 2)
            for table in RUN_TABLES:
                con.execute(f"DELETE FROM {table} WHERE study = ? AND run_id = ?", key)
            for table in STUDY_TABLES:
                if has_relation(con, table):
                    con.execute(f"DELETE FROM {table} WHERE study = ?", [chosen])
            for table in PAIR_TABLES:
                if has_relation(con, table):
                    con.execute(
                        f"DELETE FROM {table} WHERE study = ? AND ? IN (run_id, measured_run_id)", key
                    )
            refresh_runs_now(con, {(chosen, run_id)})
    for relative in paths:
        (warehouse / relative).unlink(missing_ok=True)
        _remove_empty_folders((warehouse / relative).parent, warehouse)
    return Forgotten(
        study=chosen, run_id=run_id, traces=counts[0], power_logs=counts[1], partitions=len(paths)
    )


def _remove_empty_folders(folder: Path, warehouse: Path) -> None:
    """Remove a partition's folder and its parents up to its table's while they are empty."""
    while folder.parent.parent != warehouse and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def _count(con: duckdb.DuckDBPyConnection, table: str, key: list[str]) -> int:
    return con.execute(f"SELECT count(*) FROM {table} WHERE study = ? AND run_id = ?", key).fetchall()[0][0]


def _study_of(con: duckdb.DuckDBPyConnection, warehouse: Path, run_id: str, study: str | None) -> str:
    """The study of the run: the one given, or the only one holding a run of that id."""
    found = sorted(
        s
        for (s,) in con.execute(
            "SELECT study FROM run_manifests WHERE run_id = ? UNION SELECT study FROM traces "
            "WHERE run_id = ? UNION SELECT study FROM power_files WHERE run_id = ?",
            [run_id] * 3,
        ).fetchall()
    )
    if study is not None and study in found:
        return study
    if study is not None or not found:
        where = f"study {study!r}" if study is not None else "any study"
        raise WarehouseError(f"{warehouse}: no run {run_id!r} in {where}")
    if len(found) > 1:
        raise WarehouseError(
            f"{warehouse}: run {run_id!r} is in studies {', '.join(found)}; say which with --study"
        )
    return found[0]
