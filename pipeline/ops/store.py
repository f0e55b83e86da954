"""Keep the warehouse's `op_costs` table (sql/raw/op_costs.sql) holding every signature of `ops`.

After an ingest, the signatures of ops whose names have a formula and that `op_costs` lacks are
evaluated (pipeline/ops/costs.py) and inserted: each distinct signature once per warehouse, so
the refresh costs what the new signatures cost, not what the new events do.
"""

from __future__ import annotations

import duckdb
import polars as pl
from tracehouse.pipeline.ops.costs import FORMULA_OF, SIGNATURE_COLUMNS, op_costs
from tracehouse.pipeline.ops.version import formulas_version

COLUMNS = (*SIGNATURE_COLUMNS, "formula", "flops", "bytes", "dtype", "formulas_version")
_NEW_SIGNATURES = """
SELECT DISTINCT o.name, o.input_dims, o.input_types, o.concrete_inputs
FROM ops AS o
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


def fill_op_costs(connection: duckdb.DuckDBPyConnection) -> int:
    """Evaluate and store the signatures `op_costs` lacks; return how many were added."""
    if not (has_relation(connection, "ops") and has_relation(connection, "op_costs")):
        return 0
    version = formulas_version()
    connection.execute("DELETE FROM op_costs WHERE formulas_version <> ?", [version])
    found = connection.execute(_NEW_SIGNATURES, [sorted(FORMULA_OF)]).fetchall()
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
