"""Plain HTML tables for the report: a title, column names and rows of display text."""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
from tracehouse.reports.source import columns, frame

MAX_ROWS = 300


@dataclass(kw_only=True)
class Table:
    """A table the page template renders (every cell is escaped there)."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    note: str | None = None


def cell(value: object) -> str:
    """Display text of one value: numbers with separators, None as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:.4g}"
    return str(value)


def query_table(
    con: duckdb.DuckDBPyConnection, title: str, query: str, *params: object, empty: str = "none"
) -> Table:
    """Run a query and keep at most MAX_ROWS rows, saying how many were left out."""
    rows = frame(con, query, *params)
    shown = rows.head(MAX_ROWS)
    note = None
    if rows.is_empty():
        note = empty
    elif rows.height > MAX_ROWS:
        note = f"first {MAX_ROWS} of {rows.height:,} rows shown; query the warehouse for all"
    return Table(
        title=title,
        columns=list(rows.columns),
        rows=[[cell(v) for v in row] for row in shown.iter_rows()],
        note=note,
    )


def present(con: duckdb.DuckDBPyConnection, relation: str, wanted: tuple[str, ...]) -> list[str]:
    """The wanted columns that the relation has, in the wanted order."""
    have = set(columns(con, relation))
    return [c for c in wanted if c in have]
