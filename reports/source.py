"""Where the report's numbers come from: a read-only connection to a warehouse and small query helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import polars as pl
from tracehouse.pipeline.common.errors import WarehouseError, one_line
from tracehouse.pipeline.warehouse import database
from tracehouse.pipeline.warehouse.meta import has_relation
from tracehouse.pipeline.warehouse.sandbox import seal

REQUIRED_VIEWS = ("runs", "scale_points", "step_breakdown")
# Read by several charts each; the order lets later views reuse the earlier snapshots.
SNAPSHOT_VIEWS = ("runs", "step_breakdown", "scale_points")


def open_warehouse(directory: str | Path) -> duckdb.DuckDBPyConnection:
    """Open a warehouse read-only in the query sandbox, out-of-date views recomputed in memory.

    WarehouseError when it cannot be read.
    """
    con = database.connect(Path(directory), read_only=True)
    if _missing(con) or _stale(con) or has_relation(con, "warehouse_meta"):
        con.close()  # a database of its own: the sandbox's settings stay off other connections
        con = database.open_for_query(Path(directory), isolated=True)
    with database.closed_on_error(con):
        missing = _missing(con)
        if missing:
            raise WarehouseError(f"{directory}: the warehouse has no view(s) {', '.join(missing)}")
        snapshot(con)
        seal(con, Path(directory))  # the report reads the warehouse and nothing else
    return con


def _stale(con: duckdb.DuckDBPyConnection) -> bool:
    """A warehouse tracehouse made whose relations are missing or predate its SQL or data.

    E.g. a view added by an upgrade, a comm pattern added by hand. A warehouse without
    `warehouse_meta` was made by hand (the tests' fabricated one) and is read as it is.
    """
    return has_relation(con, "warehouse_meta") and not database.views_are_current(con)


def snapshot(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Materialise the views the report reads many times as temporary tables of the same name.

    Temporary tables shadow the catalog's views for this connection only (the warehouse stays
    read-only); each view is then computed once per report, and every chart sees the same rows.
    """
    for name in SNAPSHOT_VIEWS:
        con.sql(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM main.{name}")
    return con


def _missing(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [name for name in REQUIRED_VIEWS if not has_relation(con, name)]


def frame(con: duckdb.DuckDBPyConnection, query: str, *params: Any) -> pl.DataFrame:
    """Run one query with positional `$n` parameters and return its rows as a polars frame."""
    try:
        return con.sql(query, params=list(params) or None).pl()
    except duckdb.Error as exc:
        raise WarehouseError(f"report query failed: {one_line(exc)}") from exc


def columns(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    """Column names of a table or view, empty when it does not exist."""
    rows = con.sql(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = $1 ORDER BY column_index", params=[name]
    ).fetchall()
    return list(dict.fromkeys(r[0] for r in rows))  # a snapshot lists its view's columns twice


def studies(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every study in the warehouse, sorted."""
    return [r[0] for r in con.sql("SELECT DISTINCT study FROM runs ORDER BY study").fetchall()]


def pick_study(con: duckdb.DuckDBPyConnection, study: str | None) -> str:
    """The study to report: the one named, or the only one; WarehouseError otherwise."""
    known = studies(con)
    if study is not None:
        if study not in known:
            raise WarehouseError(f"no study named {study!r}; the warehouse has: {', '.join(known) or 'none'}")
        return study
    if len(known) != 1:
        listed = ", ".join(repr(s) for s in known) or "none"
        raise WarehouseError(f"choose a study with --study; the warehouse has {len(known)}: {listed}")
    return known[0]
