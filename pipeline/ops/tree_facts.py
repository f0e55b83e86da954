"""Keep the warehouse's `op_tree` table (sql/raw/op_tree.sql): each op's phase and its place
relative to the calls that do work, from whole-array walks over each rank's call tree.

op_calls once computed these with three recursive SQL walks, one pass per tree level over every
op of the warehouse (7.3 M ops, 40 levels deep, in benchmarks/views.py: 11.2 s of a 16.4 s
refresh); here each trace is walked once, after the ingest that registers it, with the numpy
pointer jumps the parser builds the tree with (4.4 s, and op_calls then 5.0 s).
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
from tracehouse.pipeline.ops.calltree import NONE, above, nearest
from tracehouse.pipeline.ops.store import TRACE_OPS, has_relation, pending_traces, trace_batches, trace_ops
from tracehouse.pipeline.ops.version import formulas_version

BACKWARD_PREFIX = "autograd::engine::evaluate_function:"  # quoted into SQL: no quote in either
OPTIMIZER_PREFIX = "Optimizer."
COLUMNS = ("study", "run_id", "rank", "content_hash", "op_id", "phase", "above_work", "inside_unit")

# Rows of a trace no longer registered (forgotten or replaced) go, and rows of other formulas.
_STALE = """
DELETE FROM op_tree
WHERE formulas_version <> ? OR content_hash NOT IN (SELECT content_hash FROM {registered})
"""
# The missing traces, numbered (1, 2, ...: their place in the list passed as $1).
_NUMBERED = "(SELECT unnest($1) AS content_hash, generate_subscripts($1, 1) AS trace_no)"
# Each op of those traces: its parent and whether it is a phase marker (1: backward, 2: optimizer).
_TREE = f"""
SELECT
    t.trace_no::BIGINT AS trace_no, o.op_id, o.parent_id, o.kind = 'cpu_op' AS cpu_op,
    CASE
        WHEN starts_with(o.name, '{BACKWARD_PREFIX}') THEN 1
        WHEN starts_with(o.name, '{OPTIMIZER_PREFIX}') THEN 2
        ELSE 0
    END::TINYINT AS marker
FROM {TRACE_OPS} AS o
JOIN {_NUMBERED} AS t ON o.content_hash = t.content_hash
ORDER BY trace_no, o.op_id
"""
# The calls of those traces that do work (op_calls' `costed`: a cpu_op with FLOPs > 0).
_WORKING = f"""
SELECT t.trace_no::BIGINT AS trace_no, o.op_id
FROM {TRACE_OPS} AS o
JOIN {_NUMBERED} AS t ON o.content_hash = t.content_hash
JOIN (SELECT * FROM op_costs WHERE flops > 0) AS c
    ON c.name = o.name
    AND c.input_dims IS NOT DISTINCT FROM o.input_dims
    AND c.input_types IS NOT DISTINCT FROM o.input_types
    AND c.concrete_inputs IS NOT DISTINCT FROM o.concrete_inputs
WHERE o.kind = 'cpu_op'
"""
_TRACES = f"""
SELECT DISTINCT t.trace_no::BIGINT AS trace_no, o.study, o.run_id, o.rank, o.content_hash
FROM {TRACE_OPS} AS o
JOIN {_NUMBERED} AS t ON o.content_hash = t.content_hash
"""
PHASES = pl.Series(["forward", "backward", "optimizer"], dtype=pl.String)


def fill_op_tree(connection: duckdb.DuckDBPyConnection) -> int:
    """Compute the rows of the registered traces `op_tree` lacks, drop outdated ones; rows added."""
    if not has_relation(connection, "op_tree"):
        return 0  # its inputs must exist: a warehouse without `ops` or `op_costs` fails here
    connection.execute("SELECT 1 FROM op_costs LIMIT 0")  # what does work: fail now when it is missing
    version = formulas_version()
    registered = "traces" if has_relation(connection, "parquet_files") else "ops"  # as pending_traces
    connection.execute(_STALE.format(registered=registered), [version])
    added = 0
    for batch in trace_batches(connection, pending_traces(connection)):  # at most BATCH_OPS host ops each
        added += _fill_batch(connection, batch, version)
    return added


def _fill_batch(connection: duckdb.DuckDBPyConnection, hashes: list[str], version: str) -> int:
    """Walk these traces' call trees and insert their rows; how many."""
    with trace_ops(connection, hashes):  # their own files, not the glob over every partition
        ops = connection.sql(_TREE, params=[hashes]).pl()
        working = connection.sql(_WORKING, params=[hashes]).pl()
        traces = connection.sql(_TRACES, params=[hashes]).pl()
    rows = (
        tree_facts(ops, working)
        .join(traces, on="trace_no", how="left")
        .select(*COLUMNS)
        .with_columns(pl.lit(version).alias("formulas_version"))
    )
    connection.register("new_op_tree", rows.to_arrow())
    try:
        connection.execute("INSERT INTO op_tree BY NAME SELECT * FROM new_op_tree")
    finally:
        connection.unregister("new_op_tree")
    return rows.height


def tree_facts(ops: pl.DataFrame, working: pl.DataFrame) -> pl.DataFrame:
    """trace_no, op_id, phase, above_work, inside_unit of every cpu_op of `ops` (_TREE's rows, sorted
    by trace_no and op_id: one tree per trace_no; the walks go through every op kind); `working`:
    the (trace_no, op_id) of the calls that do work."""
    trace, op_id = ops["trace_no"].to_numpy(), ops["op_id"].to_numpy()
    key = trace * (1 << 40) + op_id  # sorted (_TREE's order): a lookup is a binary search
    parent_id = ops["parent_id"].fill_null(-1).to_numpy()
    parent = _positions(key, trace * (1 << 40) + parent_id, parent_id >= 0)
    marker = ops["marker"].to_numpy()
    outer = _outermost(parent, marker > 0)
    phase = np.where(outer != NONE, marker[np.maximum(outer, 0)], 0)
    works = np.zeros(len(key), dtype=bool)
    at = _positions(key, working["trace_no"].to_numpy() * (1 << 40) + working["op_id"].to_numpy(), None)
    works[at[at != NONE]] = True
    above_work = _ancestors_of(parent, works)
    unit = works & ~above_work
    inside_unit = above(parent, nearest(parent, unit)) != NONE
    keep = ops["cpu_op"].to_numpy()  # op_calls reads the cpu_op calls only
    return pl.DataFrame(
        {
            "trace_no": trace[keep],
            "op_id": op_id[keep],
            "phase": PHASES.gather(phase[keep]),
            "above_work": above_work[keep],
            "inside_unit": inside_unit[keep],
        }
    )


def _positions(key: np.ndarray, wanted: np.ndarray, valid: np.ndarray | None) -> np.ndarray:
    """Per wanted key: its position in the sorted `key`, else NONE (also where not `valid`)."""
    if not len(key):
        return np.full(len(wanted), NONE, dtype=np.int64)
    at = np.minimum(np.searchsorted(key, wanted), len(key) - 1)
    found = key[at] == wanted
    if valid is not None:
        found &= valid
    return np.where(found, at, NONE).astype(np.int64)


def _outermost(parent: np.ndarray, marker: np.ndarray) -> np.ndarray:
    """Per position: its outermost ancestor-or-self that is a marker, else NONE."""
    up = nearest(parent, marker)
    higher = above(parent, up)  # the next marker above each position's nearest one
    outer = up.copy()
    step = np.where(up != NONE, higher[np.maximum(up, 0)], NONE)
    while (step != NONE).any():
        outer = np.where(step != NONE, step, outer)
        step = np.where(step != NONE, higher[np.maximum(step, 0)], NONE)
    return outer


def _ancestors_of(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Per position: whether it is a strict ancestor of a marked position (walked up once each)."""
    seen = np.zeros(len(parent), dtype=bool)
    frontier = np.unique(parent[marked & (parent != NONE)])
    while frontier.size:
        frontier = frontier[~seen[frontier]]
        seen[frontier] = True
        up = parent[frontier]
        frontier = np.unique(up[up != NONE])
    return seen
