"""Give every registered trace its `op_calls` rows, also the traces stored without them.

An ingest task writes each trace's op_calls partition (pipeline/ops/calls.py). A trace registered
by an older tracehouse has none, and one costed by other formulas (a digest of pipeline/ops) has
stale ones: after each ingest (and when the warehouse's SQL is rebuilt) their rows are computed
from the trace's stored ops, op_launches and steps by the same function and kept in
`op_calls_healed` (sql/raw/op_calls_healed.sql), which the op_calls view prefers. Only traces
lacking rows are read, from their own partitions, in batches of at most BATCH_OPS host ops; which
partitions hold other formulas is looked up only when the formulas changed since the last look.
"""

from __future__ import annotations

import duckdb
import polars as pl
from tracehouse.pipeline.ops.calls import LAUNCH_COLUMNS, OPS_COLUMNS, STEP_COLUMNS, op_calls_frame
from tracehouse.pipeline.ops.version import formulas_version
from tracehouse.pipeline.warehouse.meta import has_relation, read_meta, write_meta
from tracehouse.pipeline.warehouse.partitions import listed_files

HEALED = "op_calls_healed"
# Host ops a batch reads at once (about 100 bytes each in the frames it builds): a 1,024-rank
# study's ops at once, after new formulas made every partition stale, would take gigabytes.
BATCH_OPS = 2_000_000
# warehouse_meta: the formulas whose partitions were last checked for other formulas.
CHECKED_KEY = "op_calls_formulas"
_KEYS = ("study", "run_id", "rank", "content_hash")
# Registered traces with host ops and neither an op_calls partition nor healed rows.
_WITHOUT_ROWS = f"""
SELECT content_hash FROM traces
WHERE coalesce(n_ops, 1) > 0
    AND content_hash NOT IN (SELECT content_hash FROM {HEALED})
    AND content_hash NOT IN (SELECT content_hash FROM parquet_files WHERE table_name = 'op_calls')
"""


def heal_op_calls(connection: duckdb.DuckDBPyConnection) -> int:
    """Compute the op_calls rows of the registered traces without current ones; rows added.

    Healed rows of traces no longer registered, or of other formulas, are dropped first.
    """
    if not has_relation(connection, HEALED):
        return 0
    version = formulas_version()
    connection.execute(
        f"DELETE FROM {HEALED} "
        "WHERE formulas_version <> ? OR content_hash NOT IN (SELECT content_hash FROM traces)",
        [version],
    )
    wanted = {h for (h,) in connection.execute(_WITHOUT_ROWS).fetchall()}
    checked = read_meta(connection, CHECKED_KEY) == version
    if not checked:
        wanted |= _costed_otherwise(connection, version)
    added = 0
    for batch in trace_batches(connection, sorted(wanted)):
        added += _heal_batch(connection, batch, version)
    if not checked:  # only once every stale trace is healed: an interrupted heal looks again
        write_meta(connection, CHECKED_KEY, version)
    return added


def trace_batches(connection: duckdb.DuckDBPyConnection, hashes: list[str]) -> list[list[str]]:
    """The traces in batches of at most BATCH_OPS host ops each (`traces.n_ops`; one trace may exceed
    it alone), in their order."""
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


def stored_rows(
    connection: duckdb.DuckDBPyConnection, table: str, hashes: list[str], columns: tuple[str, ...]
) -> pl.DataFrame:
    """These columns (and content_hash) of a Parquet table's rows of these traces, read from their own
    registered files rather than through the view's glob over every partition (at 50M events,
    thousands of files: a heal after an ingest reads what it needs)."""
    paths = connection.execute(
        "SELECT path FROM parquet_files "
        "WHERE table_name = ? AND list_contains(?, content_hash) ORDER BY path",
        [table, hashes],
    ).fetchall()
    base = connection.execute("SELECT current_setting('file_search_path')").fetchall()[0][0]
    listed = listed_files(base, f"parquet/{table}", [p for (p,) in paths])
    wanted = ", ".join(dict.fromkeys(("content_hash", *columns)))
    return connection.sql(
        f"SELECT {wanted} FROM read_parquet({listed}, union_by_name = true, hive_partitioning = false)"
    ).pl()


def _heal_batch(connection: duckdb.DuckDBPyConnection, hashes: list[str], version: str) -> int:
    """Compute these traces' op_calls rows from their stored frames and insert them; how many."""
    ops = stored_rows(connection, "ops", hashes, OPS_COLUMNS).partition_by("content_hash", as_dict=True)
    launches = stored_rows(connection, "op_launches", hashes, LAUNCH_COLUMNS).partition_by(
        "content_hash", as_dict=True
    )
    steps = stored_rows(connection, "steps", hashes, STEP_COLUMNS).partition_by("content_hash", as_dict=True)
    keys = connection.execute(
        f"SELECT {', '.join(_KEYS)} FROM traces WHERE list_contains(?, content_hash)", [hashes]
    ).fetchall()
    frames = []
    for study, run_id, rank, content_hash in keys:
        of_trace = (content_hash,)
        if of_trace not in ops:
            continue
        calls = op_calls_frame(
            ops[of_trace],
            launches.get(of_trace, pl.DataFrame(schema=dict.fromkeys(LAUNCH_COLUMNS, pl.Int64))),
            steps.get(of_trace, pl.DataFrame()),
            version=version,
        )
        frames.append(
            calls.with_columns(
                pl.lit(study).alias("study"),
                pl.lit(run_id).alias("run_id"),
                pl.lit(rank, dtype=pl.Int32).alias("rank"),
                pl.lit(content_hash).alias("content_hash"),
            )
        )
    rows = pl.concat(frames) if frames else pl.DataFrame()
    if rows.is_empty():
        return 0
    connection.register("new_op_calls", rows.to_arrow())
    try:
        connection.execute(f"INSERT INTO {HEALED} BY NAME SELECT * FROM new_op_calls")
    finally:
        connection.unregister("new_op_calls")
    return rows.height


def _costed_otherwise(connection: duckdb.DuckDBPyConnection, version: str) -> set[str]:
    """The registered traces whose op_calls partitions were costed by other formulas."""
    paths = [
        p
        for (p,) in connection.execute(
            "SELECT path FROM parquet_files WHERE table_name = 'op_calls'"
        ).fetchall()
    ]
    if not paths:
        return set()
    base = connection.execute("SELECT current_setting('file_search_path')").fetchall()[0][0]
    listed = listed_files(base, "parquet/op_calls", paths)
    rows = connection.execute(
        f"SELECT DISTINCT content_hash FROM read_parquet({listed}, union_by_name = true) "
        "WHERE formulas_version IS DISTINCT FROM ? AND content_hash IN (SELECT content_hash FROM traces)",
        [version],
    ).fetchall()
    return {h for (h,) in rows}
