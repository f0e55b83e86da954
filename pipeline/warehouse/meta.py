"""The warehouse's facts about itself (`warehouse_meta`: key -> value) and whether a relation is
there: one home for reading and writing them."""

from __future__ import annotations

import duckdb


def has_relation(connection: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether a table or view of that name exists (DuckDB's own internal ones aside)."""
    rows = connection.execute(
        "SELECT 1 FROM duckdb_tables() WHERE table_name = ? AND NOT internal UNION ALL "
        "SELECT 1 FROM duckdb_views() WHERE view_name = ? AND NOT internal",
        [name, name],
    ).fetchall()
    return bool(rows)


def read_meta(connection: duckdb.DuckDBPyConnection, key: str) -> str | None:
    """The value stored under key (None when there is none, or no warehouse_meta)."""
    if not has_relation(connection, "warehouse_meta"):
        return None
    rows = connection.execute("SELECT value FROM warehouse_meta WHERE key = ?", [key]).fetchall()
    return rows[0][0] if rows else None


def write_meta(connection: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    """Store value under key, where this connection's own database holds warehouse_meta (a read-only
    attached one is left alone: a query's in-memory rebuild looks again next time)."""
    own = connection.execute(
        "SELECT 1 FROM duckdb_tables() "
        "WHERE table_name = 'warehouse_meta' AND database_name = current_database()"
    ).fetchall()
    if own:
        connection.execute("INSERT OR REPLACE INTO warehouse_meta VALUES (?, ?)", [key, value])
