"""Recompute the materialized tables for some runs only: their inputs shadowed, their rows replaced.

Every materialized table's rows of one run are computed from that run's inputs alone (each table
has `study` and `run_id` columns; keys such as `cpu_calls.rank_key` are functions of the rank,
not numberings over the warehouse). So the rows of runs R are recomputed by running each
materialized file's SQL as a TEMP table, with the raw relations shadowed by TEMP views that
show R's rows only (DuckDB looks up temporary objects first, also from inside stored views): a
Parquet view reads only R's registered files, a catalog table with study and run_id only R's
rows. Then each table's rows of R are deleted and the new ones inserted (`refresh_runs`; the
caller holds the transaction), or, on a read-only warehouse, shown in their place (`overlay_runs`).
The temporary objects are dropped in any case.

What stays global (the SQL itself, the seeded vocabulary, `comm_kernel_patterns`) is not
shadowed: when it changes, the warehouse recomputes everything (see warehouse.refresh_materialized).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError, one_line
from tracehouse.pipeline.warehouse.partitions import listed_files
from tracehouse.pipeline.warehouse.sql_runner import RAW_LAYER, SqlFile, dependency_order
from tracehouse.pipeline.warehouse.view_docs import comment_statements, contracts_by_relation

RunKey = tuple[str, str]  # study, run_id
RUNS = "refresh_runs"  # the TEMP table of the runs being recomputed

# Per run, a digest of everything its materialized rows are computed from that is not global.
RUN_STAMPS = """
WITH inputs AS (
    SELECT study, run_id, concat('trace:', content_hash) AS item FROM traces
    UNION ALL
    SELECT study, run_id, concat('power:', content_hash) FROM power_files
    UNION ALL
    SELECT study, run_id, concat('manifest:', coalesce(manifest_hash, ''), '@', ingested_at)
    FROM run_manifests
)
SELECT study, run_id, md5(string_agg(item, ',' ORDER BY item)) FROM inputs GROUP BY study, run_id
"""
_CREATE_TABLE = re.compile(r"^CREATE OR REPLACE TABLE (?P<name>[a-z_][a-z0-9_]*) AS\b", re.MULTILINE)
_PARQUET_GLOB = re.compile(r"read_parquet\('(?P<folder>parquet/[a-z_]+)/\*\*/\*\.parquet'")


def run_stamps(connection: duckdb.DuckDBPyConnection) -> dict[RunKey, str]:
    """Every run's inputs digest (registered trace and power files, manifest)."""
    return {(study, run_id): stamp for study, run_id, stamp in connection.execute(RUN_STAMPS).fetchall()}


def changed_runs(now: dict[RunKey, str], before: dict[RunKey, str]) -> set[RunKey]:
    """Runs added, removed or whose inputs digest differs."""
    return {key for key in now.keys() | before.keys() if now.get(key) != before.get(key)}


def refresh_runs(
    connection: duckdb.DuckDBPyConnection, files: Sequence[SqlFile], runs: Iterable[RunKey]
) -> list[str]:
    """Replace the rows of these runs in every materialized table; return the tables' names."""
    target = _current_schema(connection)
    with recomputed(connection, files, runs, source=target) as ordered:
        for f in ordered:
            connection.execute(
                f"DELETE FROM {target}.{f.name} AS t USING {RUNS} AS r "
                "WHERE t.study = r.study AND t.run_id = r.run_id"
            )
            connection.execute(f"INSERT INTO {target}.{f.name} BY NAME SELECT * FROM temp.main.{f.name}")
    return [f.name for f in ordered]


def overlay_runs(
    connection: duckdb.DuckDBPyConnection, files: Sequence[SqlFile], runs: Iterable[RunKey], *, source: str
) -> list[str]:
    """Show the attached warehouse `source` (read-only) with these runs' materialized rows recomputed.

    The recomputed rows go to in-memory tables; each materialized table is then shadowed by a
    TEMP view of its stored rows of the other runs plus those (a stored view binds the names
    it reads in its own database, but temporary objects come first). Nothing is written to
    the warehouse. Returns the tables' names.
    """
    runs = sorted(set(runs))
    with recomputed(connection, files, runs, source=f"{source}.main") as ordered:
        connection.execute(f"CREATE OR REPLACE TABLE memory.main.{RUNS} AS SELECT * FROM temp.main.{RUNS}")
        for f in ordered:
            copy = f"memory.main.{f.name}__recomputed"
            connection.execute(f"CREATE OR REPLACE TABLE {copy} AS SELECT * FROM temp.main.{f.name}")
    for f in ordered:
        connection.execute(
            f"CREATE OR REPLACE TEMP VIEW {f.name} AS "
            f"SELECT t.* FROM {source}.main.{f.name} AS t ANTI JOIN memory.main.{RUNS} AS r "
            "ON t.study = r.study AND t.run_id = r.run_id "
            f"UNION ALL BY NAME SELECT * FROM memory.main.{f.name}__recomputed"
        )
        contract = contracts_by_relation().get(f.name)  # a public table shows its meaning here too
        for statement in comment_statements(contract, "VIEW", f"temp.main.{f.name}") if contract else []:
            connection.execute(statement)
    return [f.name for f in ordered]


@contextmanager
def recomputed(
    connection: duckdb.DuckDBPyConnection, files: Sequence[SqlFile], runs: Iterable[RunKey], *, source: str
) -> Iterator[list[SqlFile]]:
    """Within the block, every materialized table's rows of these runs as a TEMP table of its name.

    The inputs are read from the schema `source` (e.g. `"tracehouse".main`), shadowed by TEMP
    views that show these runs only; the TEMP table `refresh_runs` lists the runs. Yields the
    materialized files in creation order; every temporary object is dropped afterwards.
    """
    runs = sorted(set(runs))
    ordered = [f for f in dependency_order(files) if f.materialized]
    created: list[tuple[str, str]] = []  # (kind, name) of the temporary objects
    try:
        connection.execute(f"CREATE OR REPLACE TEMP TABLE {RUNS} (study VARCHAR, run_id VARCHAR)")
        created.append(("TABLE", RUNS))
        if runs:
            connection.executemany(f"INSERT INTO {RUNS} VALUES (?, ?)", [list(r) for r in runs])
        for f in files:
            if f.layer == RAW_LAYER:
                _shadow_raw(connection, f, source, created)
        for f in ordered:
            _compute(connection, f, created)
        yield ordered
    finally:
        for kind, name in reversed(created):
            connection.execute(f"DROP {kind} IF EXISTS temp.main.{name}")


def _current_schema(connection: duckdb.DuckDBPyConnection) -> str:
    return f'"{connection.execute("SELECT current_database()").fetchall()[0][0]}".main'


def _shadow_raw(
    connection: duckdb.DuckDBPyConnection, f: SqlFile, target: str, created: list[tuple[str, str]]
) -> None:
    """A TEMP view of a raw relation showing only the refreshed runs' rows (none for global ones)."""
    glob = _PARQUET_GLOB.search(f.text)
    if glob is not None:
        folder = glob["folder"]
        paths = [
            row[0]
            for row in connection.execute(
                f"""SELECT p.path FROM {target}.parquet_files AS p
                WHERE p.table_name = ? AND p.content_hash IN (
                    SELECT content_hash FROM {target}.traces SEMI JOIN {RUNS} USING (study, run_id)
                    UNION ALL
                    SELECT content_hash FROM {target}.power_files SEMI JOIN {RUNS} USING (study, run_id)
                ) ORDER BY p.path""",
                [folder.split("/", 1)[1]],
            ).fetchall()
        ]
        # the schema-only file keeps the list non-empty and the column types fixed; each path
        # named as one file under the directory the views' globs are relative to
        base = connection.execute("SELECT current_setting('file_search_path')").fetchall()[0][0]
        text = (
            f.text[: glob.start()]
            + f"read_parquet({listed_files(base, folder, paths)}"
            + f.text[glob.end() :]
        )
        header = f"CREATE OR REPLACE VIEW {f.name} AS"
        if header not in text:
            raise WarehouseError(f"{f.label}: a Parquet view must start '{header}'")
        connection.execute(text.replace(header, f"CREATE OR REPLACE TEMP VIEW {f.name} AS", 1))
        created.append(("VIEW", f.name))
        return
    columns = {row[0] for row in connection.execute(f"DESCRIBE {target}.{f.name}").fetchall()}
    if {"study", "run_id"} <= columns:
        connection.execute(
            f"CREATE OR REPLACE TEMP VIEW {f.name} AS SELECT t.* FROM {target}.{f.name} AS t "
            f"SEMI JOIN {RUNS} AS r ON t.study = r.study AND t.run_id = r.run_id"
        )
        created.append(("VIEW", f.name))


def _compute(connection: duckdb.DuckDBPyConnection, f: SqlFile, created: list[tuple[str, str]]) -> None:
    """Run a materialized file as a TEMP table (it shadows the stored one for the files after it)."""
    match = _CREATE_TABLE.search(f.text)
    if match is None or match["name"] != f.name:
        header = f"CREATE OR REPLACE TABLE {f.name} AS"
        raise WarehouseError(f"{f.label}: a materialized file must start '{header}'")
    text = f.text[: match.start()] + f"CREATE OR REPLACE TEMP TABLE {f.name} AS" + f.text[match.end() :]
    try:
        connection.execute(text)
    except duckdb.Error as exc:
        raise WarehouseError(f"{f.label} failed (refreshing some runs): {one_line(exc)}") from exc
    created.append(("TABLE", f.name))
    columns = {row[0] for row in connection.execute(f"DESCRIBE temp.main.{f.name}").fetchall()}
    if not {"study", "run_id"} <= columns:
        raise WarehouseError(f"{f.label}: a materialized table needs study and run_id columns (kept per run)")
