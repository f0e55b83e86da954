"""Provenance: which runs and files the report was made from, and which files failed to load."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path, PurePath

import duckdb
from tracehouse.reports.source import has_relation
from tracehouse.reports.tables import Table, present, query_table

RUN_COLUMNS = (
    "run_id",
    "model",
    "strategy",
    "world_size",
    "nodes",
    "devices_per_node",
    "dp",
    "tp",
    "pp",
    "device_type",
    "n_params",
    "tokens_per_step",
)
TRACE_COLUMNS = ("run_id", "rank", "host", "path", "content_hash", "size_bytes", "n_events", "rank_source")
# Files are listed in the order of their runs: by strategy, then scale.
RUN_ORDER = (
    "SELECT run_id, row_number() OVER (ORDER BY strategy, world_size, run_id) AS run_order "
    "FROM runs WHERE study = $1"
)
POWER_FILE_COLUMNS = ("run_id", "host", "source", "path", "content_hash", "n_samples")


def display_path(path: str, cwd: Path | None = None, *, parts: int = 2) -> str:
    """A path as the page shows it: relative to the working directory when under it, else its last
    `parts` components (a file: its run folder and name; a warehouse: its own name). A temporary
    folder tells a reader nothing, and a shared page should not carry the machine's layout."""
    if "://" in path:  # an fsspec URL names its bucket, not a machine's folders
        return path
    pure = PurePath(path)
    if not pure.is_absolute():
        return path
    try:
        return str(pure.relative_to(cwd or Path.cwd()))
    except ValueError:
        return str(PurePath(*pure.parts[-parts:])) if len(pure.parts) > parts else path


def _short_paths(table: Table) -> Table:
    if "path" not in table.columns:
        return table
    at = table.columns.index("path")
    rows = [[display_path(v) if i == at and v else v for i, v in enumerate(row)] for row in table.rows]
    return replace(table, rows=rows)


def _listed(relation: str, wanted: tuple[str, ...], con: duckdb.DuckDBPyConnection) -> str:
    return ", ".join(f'"{c}"' for c in present(con, relation, wanted))


def provenance_tables(con: duckdb.DuckDBPyConnection, study: str) -> list[Table]:
    """Runs, trace files, power logs and ingest errors behind the report."""
    tables = [
        query_table(
            con,
            "Runs",
            f"SELECT {_listed('runs', RUN_COLUMNS, con)} FROM runs WHERE study = $1 "
            "ORDER BY strategy, world_size, run_id",
            study,
        )
    ]
    if "run_coverage" in present(con, "trace_coverage", ("run_coverage",)):
        tables.append(
            query_table(
                con,
                "Partial runs (traces of fewer ranks than the world size)",
                "SELECT run_id, any_value(run_world_size) AS world_size, list(rank ORDER BY rank) AS ranks, "
                "any_value(run_coverage) AS note FROM trace_coverage "
                "WHERE study = $1 AND run_coverage IS NOT NULL GROUP BY run_id ORDER BY run_id",
                study,
                empty="none: every run has a trace of each of its ranks",
            )
        )
    if has_relation(con, "traces"):
        tables.append(
            query_table(
                con,
                "Trace files",
                f"SELECT {_listed('traces', TRACE_COLUMNS, con)} FROM traces "
                f"JOIN ({RUN_ORDER}) USING (run_id) "
                "WHERE study = $1 ORDER BY run_order, rank",
                study,
                empty="no trace file registered",
            )
        )
    if has_relation(con, "power_files"):
        tables.append(
            query_table(
                con,
                "Power logs",
                f"SELECT {_listed('power_files', POWER_FILE_COLUMNS, con)} FROM power_files "
                f"JOIN ({RUN_ORDER}) USING (run_id) WHERE study = $1 ORDER BY run_order, path",
                study,
                empty="no power log registered",
            )
        )
    # ingest_errors has no study: a file that failed to load could not say which study it was for.
    tables.append(
        query_table(
            con,
            "Ingest errors (whole warehouse)",
            'SELECT path, content_hash, reason, "at" FROM ingest_errors ORDER BY "at", path',
            empty="no file failed to load",
        )
    )
    return [_short_paths(t) for t in tables]
