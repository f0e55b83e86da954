"""The warehouse catalog: registering files, errors and runs (driver side, one transaction each).

Only the ingest driver writes here; `parquet_files` lists every registered Parquet partition,
so any other file under `parquet/` is an orphan of an interrupted ingest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
from tracehouse.pipeline.warehouse import EMPTY_NAME, PARQUET_DIR


def registered_hashes(connection: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """Content hashes of every registered trace and power log."""
    rows = connection.sql("SELECT content_hash FROM traces UNION ALL SELECT content_hash FROM power_files")
    return frozenset(row[0] for row in rows.fetchall())


def register_file(
    connection: duckdb.DuckDBPyConnection, table: str, row: dict, files: list[tuple[str, str, int]]
) -> None:
    """Register one source file (its `traces` or `power_files` row and its partitions) atomically."""
    with _transaction(connection):
        for table_name, path, n_rows in files:
            connection.execute(
                "INSERT INTO parquet_files (table_name, path, n_rows, content_hash) VALUES (?, ?, ?, ?)",
                [table_name, path, n_rows, row["content_hash"]],
            )
        _insert_row(connection, table, row)
        connection.execute("DELETE FROM ingest_errors WHERE content_hash = ?", [row["content_hash"]])


def unregister_trace(connection: duckdb.DuckDBPyConnection, warehouse_dir: Path, content_hash: str) -> None:
    """Remove a registered trace and delete its Parquet files."""
    paths = connection.execute(
        "SELECT path FROM parquet_files WHERE content_hash = ?", [content_hash]
    ).fetchall()
    with _transaction(connection):
        connection.execute("DELETE FROM parquet_files WHERE content_hash = ?", [content_hash])
        connection.execute("DELETE FROM traces WHERE content_hash = ?", [content_hash])
    for (path,) in paths:
        (Path(warehouse_dir) / path).unlink(missing_ok=True)


def record_error(
    connection: duckdb.DuckDBPyConnection, path: str, content_hash: str | None, reason: str
) -> None:
    """Record one failed file in ingest_errors (one row per path, hash and reason: the latest attempt)."""
    with _transaction(connection):
        connection.execute(
            "DELETE FROM ingest_errors WHERE path = ? AND content_hash IS NOT DISTINCT FROM ? AND reason = ?",
            [path, content_hash, reason],
        )
        connection.execute(
            'INSERT INTO ingest_errors (path, content_hash, reason, "at") VALUES (?, ?, ?, now())',
            [path, content_hash, reason],
        )


def register_run(connection: duckdb.DuckDBPyConnection, row: dict) -> None:
    """Insert or update a run_manifests row; a command-line stub never replaces a manifest file's row."""
    existing = connection.execute(
        "SELECT origin, manifest_hash FROM run_manifests WHERE study = ? AND run_id = ?",
        [row["study"], row["run_id"]],
    ).fetchall()
    if existing and (row["origin"] != "file" or existing[0][1] == row["manifest_hash"]):
        return
    with _transaction(connection):
        connection.execute(
            "DELETE FROM run_manifests WHERE study = ? AND run_id = ?", [row["study"], row["run_id"]]
        )
        _insert_row(connection, "run_manifests", row)


def clean_orphans(connection: duckdb.DuckDBPyConnection, warehouse_dir: Path) -> list[str]:
    """Delete temporary and unregistered Parquet files an interrupted ingest left; return their paths."""
    root = Path(warehouse_dir)
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


@contextmanager
def _transaction(connection: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Run the block in one transaction: committed if it completes, rolled back if it raises."""
    connection.execute("BEGIN TRANSACTION")
    try:
        yield
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _insert_row(connection: duckdb.DuckDBPyConnection, table: str, row: dict) -> None:
    """Insert one row given as a column -> value mapping."""
    columns = ", ".join(f'"{c}"' for c in row)
    marks = ", ".join("?" for _ in row)
    connection.execute(f"INSERT INTO {table} ({columns}) VALUES ({marks})", list(row.values()))
