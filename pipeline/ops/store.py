"""Keep the warehouse's `op_costs` table (sql/raw/op_costs.sql) holding every signature of `ops`.

After an ingest, the signatures of ops whose names have a formula and that `op_costs` lacks are
evaluated (pipeline/ops/costs.py) and inserted: each distinct signature once per warehouse, so
the refresh costs what the new signatures cost, not what the new events do. Only the traces no
fill has seen are read, from their own partitions (`trace_ops`), so that cost does not grow with
what the warehouse already holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import polars as pl
from tracehouse.pipeline.ops.costs import FORMULA_OF, SIGNATURE_COLUMNS, op_costs
from tracehouse.pipeline.ops.version import formulas_version
from tracehouse.pipeline.warehouse.partitions import listed_files, sql_literal

COLUMNS = (*SIGNATURE_COLUMNS, "formula", "flops", "bytes", "dtype", "formulas_version")
# The TEMP view of the `ops` rows of the traces a fill reads (`trace_ops`).
TRACE_OPS = "fill_ops"
# Host ops a fill reads at once (about 100 bytes each in the frames it builds): a 1,024-rank
# study's ops at once, after new formulas made every row stale, would take gigabytes.
BATCH_OPS = 2_000_000
# The registered traces with host ops that `op_tree` holds no rows of: the ones no fill has seen
# (a trace registered by an older tracehouse, without n_ops, counts as having some). Where `ops`
# is held in DuckDB itself (no Parquet partitions: a test's hand-made tables) it names them itself.
PENDING_TRACES = """
SELECT DISTINCT content_hash FROM {source}
WHERE content_hash NOT IN (SELECT DISTINCT content_hash FROM op_tree)
ORDER BY content_hash
"""
_NEW_SIGNATURES = f"""
SELECT DISTINCT o.name, o.input_dims, o.input_types, o.concrete_inputs
FROM {TRACE_OPS} AS o
WHERE o.kind = 'cpu_op' AND list_contains(?, o.name)
    AND NOT EXISTS (
        SELECT 1 FROM op_costs AS c
        WHERE c.name = o.name
            AND c.input_dims IS NOT DISTINCT FROM o.input_dims
            AND c.input_types IS NOT DISTINCT FROM o.input_types
            AND c.concrete_inputs IS NOT DISTINCT FROM o.concrete_inputs
    )
"""


def has_relation(connection: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the current schema (or the search path) holds this relation."""
    rows = connection.execute(
        "SELECT 1 FROM duckdb_tables() WHERE table_name = ? UNION ALL "
        "SELECT 1 FROM duckdb_views() WHERE view_name = ?",
        [name, name],
    ).fetchall()
    return bool(rows)


def pending_traces(connection: duckdb.DuckDBPyConnection, *, every: bool = False) -> list[str]:
    """The content hashes of PENDING_TRACES; `every`: of all registered traces with host ops."""
    if has_relation(connection, "parquet_files"):
        source = "(SELECT content_hash FROM traces WHERE coalesce(n_ops, 1) > 0)"
    else:
        source = "ops"
    query = PENDING_TRACES.format(source=source)
    if every:
        query = f"SELECT DISTINCT content_hash FROM {source} ORDER BY content_hash"
    return [h for (h,) in connection.execute(query).fetchall()]


def trace_batches(connection: duckdb.DuckDBPyConnection, hashes: list[str]) -> list[list[str]]:
    """The traces in batches of at most BATCH_OPS host ops each (`traces.n_ops`; one trace may exceed
    it alone), in their order."""
    sizes = {}
    if has_relation(connection, "parquet_files"):  # a warehouse (a test's hand-made tables: one batch)
        sizes = dict(
            connection.execute(
                "SELECT content_hash, coalesce(n_ops, 0) FROM traces WHERE list_contains(?, content_hash)",
                [hashes],
            ).fetchall()
        )
    batches: list[list[str]] = []
    held = 0
    for h in hashes:
        if not batches or held + sizes.get(h, 0) > BATCH_OPS:
            batches.append([])
            held = 0
        batches[-1].append(h)
        held += sizes.get(h, 0)
    return batches


@contextmanager
def trace_ops(connection: duckdb.DuckDBPyConnection, hashes: list[str]) -> Iterator[None]:
    """Within the block, TRACE_OPS shows the `ops` rows of these traces, read from their own registered
    files rather than through the view's glob over every partition (at 50M events, thousands of
    files: the fills after an ingest read what it added)."""
    if not has_relation(connection, "parquet_files"):  # `ops` held in DuckDB itself (a test's tables)
        connection.execute(
            f"CREATE OR REPLACE TEMP VIEW {TRACE_OPS} AS SELECT * FROM ops "
            f"WHERE list_contains([{', '.join(map(sql_literal, hashes))}]::VARCHAR[], content_hash)"
        )
    else:
        paths = connection.execute(
            "SELECT path FROM parquet_files WHERE table_name = 'ops' AND list_contains(?, content_hash) "
            "ORDER BY path",
            [hashes],
        ).fetchall()
        base = connection.execute("SELECT current_setting('file_search_path')").fetchall()[0][0]
        listed = listed_files(base, "parquet/ops", [p for (p,) in paths])
        connection.execute(
            f"CREATE OR REPLACE TEMP VIEW {TRACE_OPS} AS SELECT * FROM "
            f"read_parquet({listed}, union_by_name = true, hive_partitioning = false)"
        )
    try:
        yield
    finally:
        connection.execute(f"DROP VIEW IF EXISTS temp.main.{TRACE_OPS}")


def fill_op_costs(connection: duckdb.DuckDBPyConnection) -> int:
    """Evaluate and store the signatures `op_costs` lacks; return how many were added.

    Only the traces no fill has seen are read (PENDING_TRACES), unless the formulas changed: then
    every signature of the warehouse is evaluated again. Traces are read in batches (BATCH_OPS).
    """
    if not (has_relation(connection, "ops") and has_relation(connection, "op_costs")):
        return 0
    version = formulas_version()
    outdated = connection.execute("SELECT count(*) FROM op_costs WHERE formulas_version <> ?", [version])
    every = bool(outdated.fetchall()[0][0]) or not has_relation(connection, "op_tree")
    connection.execute("DELETE FROM op_costs WHERE formulas_version <> ?", [version])
    added = 0
    for batch in trace_batches(connection, pending_traces(connection, every=every)):
        with trace_ops(connection, batch):
            found = connection.execute(_NEW_SIGNATURES, [sorted(FORMULA_OF)]).fetchall()
        added += _insert_costs(connection, found, version)
    return added


def _insert_costs(connection: duckdb.DuckDBPyConnection, found: list[tuple], version: str) -> int:
    """Evaluate new signatures and insert their rows; how many."""
    new = pl.DataFrame(found, schema=dict.fromkeys(SIGNATURE_COLUMNS, pl.String), orient="row")
    if new.is_empty():
        return 0
    rows = op_costs(new).with_columns(pl.lit(version).alias("formulas_version")).select(COLUMNS)
    connection.register("new_op_costs", rows.to_arrow())
    try:
        connection.execute(f"INSERT INTO op_costs ({', '.join(COLUMNS)}) SELECT * FROM new_op_costs")
    finally:
        connection.unregister("new_op_costs")
    return rows.height
