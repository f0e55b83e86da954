"""The warehouse catalog: registering files, errors and runs (driver side, one transaction each).

Only the ingest driver writes here; `parquet_files` lists every registered Parquet partition,
so any other file under `parquet/` is an orphan of an interrupted ingest. The driver opens the
catalog read-write only for short phases (readers can open the file in between) and holds the
ingest lock throughout, so no other ingest cleans up the partitions it has yet to register.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl
from tracehouse.pipeline.common.errors import WarehouseError, one_line, system_fault
from tracehouse.pipeline.common.manifest import STATED_FACTS
from tracehouse.pipeline.warehouse.database import connect, is_locked, transaction
from tracehouse.pipeline.warehouse.partitions import EMPTY_NAME, PARQUET_DIR, Partition, duckdb_file

LOCK_NAME = ".ingest.lock"
# Present while the last ingest ended with every Parquet file it wrote registered or deleted.
CLEAN_NAME = ".ingest.clean"
# Why a worker's partition the driver cannot see or read as written may be so.
SHARED_HINT = " (the warehouse must be on a filesystem shared with the Dask workers)"


@contextmanager
def ingest_lock(warehouse_dir: Path) -> Iterator[None]:
    """Hold the warehouse's ingest lock (one ingest at a time); WarehouseError if another holds it."""
    try:
        handle = open(Path(warehouse_dir) / LOCK_NAME, "a")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise WarehouseError(f"{warehouse_dir}: cannot write: {system_fault(exc) or one_line(exc)}") from exc
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise WarehouseError(
                    f"{warehouse_dir}: busy: another tracehouse ingest is writing it; retry when it finishes"
                ) from exc
            # A filesystem without flock (some cluster mounts): go on, as before this lock existed.
        yield


@contextmanager
def faults_named(warehouse_dir: Path) -> Iterator[None]:
    """A DuckDB write that failed for a system fault (disk full, read-only) as one WarehouseError line."""
    try:
        yield
    except duckdb.Error as exc:
        if (fault := system_fault(exc)) is None:
            raise
        raise WarehouseError(
            f"{warehouse_dir}: cannot write the catalog: {fault}; the files registered before are kept, "
            "nothing half-written is: fix that, then run the same ingest again"
        ) from exc


def open_catalog(warehouse_dir: Path, *, wait_s: float) -> duckdb.DuckDBPyConnection | None:
    """A read-write connection, retried for up to wait_s seconds while readers hold the file; else None."""
    try:
        return connect(warehouse_dir, wait_s=wait_s)
    except WarehouseError as exc:
        if is_locked(exc.__cause__):
            return None
        raise


@contextmanager
def catalog_phase(warehouse_dir: Path, *, wait_s: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection for one phase, waiting up to wait_s for readers; else WarehouseError."""
    connection = open_catalog(warehouse_dir, wait_s=wait_s)
    if connection is None:
        raise WarehouseError(
            f"{warehouse_dir}: busy: other processes kept it open for {wait_s:.0f} s; "
            "run the ingest again (files not registered yet are parsed again)"
        )
    with connection:
        yield connection


def registered_hashes(connection: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """Content hashes of every registered trace, power log and nccl-tests file."""
    rows = connection.sql(
        "SELECT content_hash FROM traces UNION ALL SELECT content_hash FROM power_files "
        "UNION ALL SELECT content_hash FROM network_files"
    )
    return frozenset(row[0] for row in rows.fetchall())


def register_file(
    connection: duckdb.DuckDBPyConnection,
    table: str,
    row: dict,
    files: list[Partition],
    tables: dict[str, pl.DataFrame] | None = None,
    run_row: dict | None = None,
    warnings: Iterable[str] = (),
) -> None:
    """Register one source file atomically: its `traces` / `power_files` / `network_files` row, its
    partitions, its rows of DuckDB tables (`tables`, by table name), its warnings (as
    `ingest_errors` rows of severity 'warning'), and its run's run_manifests row (`run_row`) when
    it is the run's first file: a run appears with a file.

    The partitions go in one statement: a statement per partition cost 0.8 ms each on the dev VM,
    most of a trace's registration.
    """
    with transaction(connection):
        if run_row is not None:
            upsert_run(connection, run_row)
        if files:
            values = ", ".join("(?, ?, ?, ?, ?, ?)" for _ in files)
            connection.execute(
                "INSERT INTO parquet_files (table_name, path, n_rows, size_bytes, crc32, content_hash) "
                f"VALUES {values}",
                [
                    v
                    for p in files
                    for v in (p.table, p.path, p.n_rows, p.size_bytes, p.crc32, row["content_hash"])
                ],
            )
        for table_name, frame in (tables or {}).items():
            _insert_frame(connection, table_name, frame)
        _insert_row(connection, table, row)
        # The path's latest attempt succeeded. Not by hash: a copy failing elsewhere (no rank, a
        # rank clash, a bad manifest) still fails there.
        connection.execute("DELETE FROM ingest_errors WHERE path = ?", [row["path"]])
        for warning in warnings:
            connection.execute(
                'INSERT INTO ingest_errors (path, content_hash, reason, "at", severity) '
                "VALUES (?, ?, ?, now(), 'warning')",
                [row["path"], row["content_hash"], warning],
            )


def partition_problem(
    connection: duckdb.DuckDBPyConnection, warehouse_dir: Path, files: Iterable[Partition]
) -> str | None:
    """Why the driver cannot register a worker's partitions (missing, unreadable, other row counts), or None.

    Only the footers' row counts are read, by DuckDB, every partition of the file in one query
    (0.13 ms a partition on the dev VM; through Polars, 2-4 ms).
    """
    expected = {p.path: p.n_rows for p in files}
    if not expected:  # DuckDB's metadata function refuses an empty list
        return None

    def problem(relative: str, what: str) -> str:
        return f"the worker's Parquet partition {relative} {what}{SHARED_HINT}"

    for relative in expected:
        if not os.path.isfile(Path(warehouse_dir) / relative):  # (False on any OSError: EACCES, ESTALE)
            return problem(relative, "is not visible from the driver")
    try:
        seen = footer_rows(connection, warehouse_dir, list(expected))
    except duckdb.Error as together:  # which one: each alone
        for relative in expected:
            try:
                footer_rows(connection, warehouse_dir, [relative])
            except duckdb.Error as exc:
                return problem(relative, f"is unreadable on the driver: {one_line(exc)}")
        reason = one_line(together)
        return f"the worker's Parquet partitions are unreadable on the driver: {reason}{SHARED_HINT}"
    for relative, n_rows in expected.items():
        if (rows := seen.get(relative)) != n_rows:
            return problem(relative, f"has {rows} rows seen from the driver, the worker wrote {n_rows}")
    return None


def footer_rows(
    connection: duckdb.DuckDBPyConnection, warehouse_dir: Path, relatives: list[str]
) -> dict[str, int]:
    """Rows of Parquet files given relative to the warehouse, from their footers (one query for all)."""
    listed = [duckdb_file(warehouse_dir, r) for r in relatives]
    rows = connection.execute("SELECT file_name, num_rows FROM parquet_file_metadata(?)", [listed])
    by_path = {os.path.realpath(name): n for name, n in rows.fetchall()}
    return {r: by_path[p] for r in relatives if (p := os.path.realpath(Path(warehouse_dir) / r)) in by_path}


def clear_errors(connection: duckdb.DuckDBPyConnection, path: str) -> None:
    """Forget the failures recorded for a path (its latest attempt succeeded); its warnings stay."""
    connection.execute("DELETE FROM ingest_errors WHERE path = ? AND severity = 'error'", [path])


def rank_holder(connection: duckdb.DuckDBPyConnection, study: str, run_id: str, rank: int) -> tuple | None:
    """(content_hash, path) of the registered trace holding a rank of a run, or None."""
    rows = connection.execute(
        "SELECT content_hash, path FROM traces WHERE study = ? AND run_id = ? AND rank = ?",
        [study, run_id, rank],
    ).fetchall()
    return rows[0] if rows else None


def forget_file(connection: duckdb.DuckDBPyConnection, content_hash: str) -> None:
    """Remove a registered trace's or power log's catalog rows (its Parquet files stay: being replaced)."""
    with transaction(connection):
        for table in ("parquet_files", "traces", "power_files"):
            connection.execute(f"DELETE FROM {table} WHERE content_hash = ?", [content_hash])


def unregister_trace(connection: duckdb.DuckDBPyConnection, warehouse_dir: Path, content_hash: str) -> None:
    """Remove a registered trace and delete its Parquet files."""
    paths = connection.execute(
        "SELECT path FROM parquet_files WHERE content_hash = ?", [content_hash]
    ).fetchall()
    with transaction(connection):
        connection.execute("DELETE FROM parquet_files WHERE content_hash = ?", [content_hash])
        connection.execute("DELETE FROM traces WHERE content_hash = ?", [content_hash])
    for (path,) in paths:
        (Path(warehouse_dir) / path).unlink(missing_ok=True)


def record_error(
    connection: duckdb.DuckDBPyConnection,
    path: str,
    content_hash: str | None,
    reason: str,
    *,
    internal: bool = False,
) -> None:
    """Record one failed file in ingest_errors, replacing the path's earlier rows (the latest attempt)."""
    with transaction(connection):
        connection.execute("DELETE FROM ingest_errors WHERE path = ?", [path])
        connection.execute(
            'INSERT INTO ingest_errors (path, content_hash, reason, "at", internal) '
            "VALUES (?, ?, ?, now(), ?)",
            [path, content_hash, reason, internal],
        )


def register_run(connection: duckdb.DuckDBPyConnection, row: dict) -> None:
    """Insert or update a run_manifests row in a transaction of its own (see `upsert_run`)."""
    with transaction(connection):
        upsert_run(connection, row)


def run_registered(connection: duckdb.DuckDBPyConnection, study: str, run_id: str) -> bool:
    """Whether the warehouse has a run_manifests row for the run."""
    return bool(
        connection.execute(
            "SELECT 1 FROM run_manifests WHERE study = ? AND run_id = ?", [study, run_id]
        ).fetchall()
    )


def upsert_run(connection: duckdb.DuckDBPyConnection, row: dict) -> None:
    """Insert or update a run_manifests row; a command-line stub never replaces a manifest file's row.

    A stub over an earlier stub keeps the facts stated before (`STATED_FACTS`) unless it states them anew.
    """
    cursor = connection.execute(
        "SELECT * FROM run_manifests WHERE study = ? AND run_id = ?", [row["study"], row["run_id"]]
    )
    names = [column[0] for column in cursor.description]
    existing = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    if existing:
        before = existing[0]
        if row["origin"] == "file" and before["manifest_hash"] == row["manifest_hash"]:
            return
        if row["origin"] != "file":
            if before["origin"] == "file":
                return
            row = {**row, **{k: before[k] for k in STATED_FACTS if row.get(k) is None}}
            if all(row.get(k) == before[k] for k in STATED_FACTS):
                return
    connection.execute(
        "DELETE FROM run_manifests WHERE study = ? AND run_id = ?", [row["study"], row["run_id"]]
    )
    _insert_row(connection, "run_manifests", row)


def clean_orphans(connection: duckdb.DuckDBPyConnection, warehouse_dir: Path) -> list[str]:
    """Delete temporary and unregistered Parquet files an interrupted ingest left; return their paths.

    When the last ingest ended cleanly (`mark_clean`) there are none, and the Parquet folders,
    which grow with everything the warehouse holds (0.16 s for 5,000 files here), are not listed.
    The mark is removed first: if this ingest is interrupted, the next one cleans up after it.
    """
    root = Path(warehouse_dir)
    mark = root / CLEAN_NAME
    if mark.exists():
        mark.unlink()
        return []
    known = {row[0] for row in connection.sql("SELECT path FROM parquet_files").fetchall()}
    removed = []
    for f in sorted((root / PARQUET_DIR).rglob("*")):
        if not f.is_file() or f.name == EMPTY_NAME:
            continue
        relative = f.relative_to(root).as_posix()
        if relative not in known:
            f.unlink(missing_ok=True)
            removed.append(relative)
    return removed


def mark_clean(warehouse_dir: Path) -> None:
    """Record that this ingest ended with every Parquet file it wrote registered or deleted."""
    (Path(warehouse_dir) / CLEAN_NAME).touch()


def _insert_row(connection: duckdb.DuckDBPyConnection, table: str, row: dict) -> None:
    """Insert one row given as a column -> value mapping."""
    columns = ", ".join(f'"{c}"' for c in row)
    marks = ", ".join("?" for _ in row)
    connection.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(row.values()))


def _insert_frame(connection: duckdb.DuckDBPyConnection, table: str, frame: pl.DataFrame) -> None:
    """Insert a frame's rows, its columns matched to the table's by name."""
    connection.register("_tracehouse_rows", frame.to_arrow())
    try:
        connection.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _tracehouse_rows")
    finally:
        connection.unregister("_tracehouse_rows")


def coverage_warnings(connection: duckdb.DuckDBPyConnection, content_hashes: Iterable[str]) -> list[str]:
    """One line per partial run among the given traces', then one per trace without a (full) breakdown."""
    hashes = sorted(content_hashes)
    if not hashes:
        return []
    loaded = "t.content_hash IN (SELECT unnest(?::VARCHAR[]))"
    runs = connection.execute(
        f"""
        SELECT DISTINCT c.study, c.run_id, c.run_coverage
        FROM trace_coverage AS c
        JOIN traces AS t ON t.study = c.study AND t.run_id = c.run_id AND t.rank = c.rank
        WHERE c.run_coverage IS NOT NULL AND {loaded}
        ORDER BY c.study, c.run_id
        """,
        [hashes],
    ).fetchall()
    ranks = connection.execute(
        f"""
        SELECT c.study, c.run_id, c.rank, c.warning
        FROM trace_coverage AS c
        JOIN traces AS t ON t.study = c.study AND t.run_id = c.run_id AND t.rank = c.rank
        WHERE c.warning IS NOT NULL AND {loaded}
        ORDER BY c.study, c.run_id, c.rank
        """,
        [hashes],
    ).fetchall()
    return [f"run {study}/{run_id}: {coverage}" for study, run_id, coverage in runs] + [
        f"rank {rank} of run {study}/{run_id}: {reason}" for study, run_id, rank, reason in ranks
    ]
