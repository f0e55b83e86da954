"""Test helper: an in-memory DuckDB holding the raw relations, built from small hand-made rows.

The raw tables get exactly the columns of `tracehouse.pipeline.warehouse.schema` plus the run keys, so
the SQL under `sql/seeds/`, `sql/views/` and `sql/materialized/` runs against them unchanged;
`create_views` runs those files with the warehouse's runner (in the order their headers
declare, seeds filled) and `refresh` reruns the materialized tables after the raw rows changed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import duckdb
import polars as pl
from tracehouse.pipeline.ops.calls import LAUNCH_COLUMNS, OPS_COLUMNS, STEP_COLUMNS, op_calls_frame
from tracehouse.pipeline.ops.version import formulas_version
from tracehouse.pipeline.warehouse import schema
from tracehouse.pipeline.warehouse.sql_runner import (
    RAW_LAYER,
    SqlFile,
    create_relations,
    load_sql_files,
)

US = 1000  # ns per µs: hand-made tests write times in µs for readability

RAW_TABLES: dict[str, dict[str, pl.DataType]] = {
    "events": schema.EVENTS,
    "steps": schema.STEPS,
    "collectives_raw": schema.COLLECTIVES,
    "threads": schema.THREADS,
    "process_groups": schema.PROCESS_GROUPS,
    "ops": schema.OPS,
    "op_launches": schema.OP_LAUNCHES,
    "memory_events": schema.MEMORY_EVENTS,
}
TRACES: dict[str, pl.DataType] = {
    "study": pl.String,
    "run_id": pl.String,
    "rank": pl.Int32,
    "path": pl.String,
    "content_hash": pl.String,
    "host": pl.String,
    "backend": pl.String,
    "world_size": pl.Int32,
    "device_name": pl.String,
    "n_steps": pl.Int64,
    "n_events": pl.Int64,
    "n_device_events": pl.Int64,
    "n_streamless_device_events": pl.Int64,
    "unknown_categories": pl.String,
    # what the op-level views can use (NULL: not counted by the hand-made tests)
    "n_ops": pl.Int64,
    "n_ops_with_shapes": pl.Int64,
    "n_ops_in_modules": pl.Int64,
    "n_op_launches": pl.Int64,
    "n_linked_launches": pl.Int64,
    "n_memory_events": pl.Int64,
}
RUN_MANIFESTS: dict[str, pl.DataType] = {
    "study": pl.String,
    "run_id": pl.String,
    "model": pl.String,
    "model_config": pl.String,
    "n_params": pl.Int64,
    "flops_per_token": pl.Float64,
    "global_batch": pl.Int64,
    "seq_len": pl.Int64,
    "tokens_per_step": pl.Int64,
    "strategy": pl.String,
    "dp": pl.Int32,
    "tp": pl.Int32,
    "pp": pl.Int32,
    "world_size": pl.Int32,
    "nodes": pl.Int32,
    "devices_per_node": pl.Int32,
    "node_devices": pl.Int32,
    "device_type": pl.String,
    "device_name": pl.String,
    "dtype": pl.String,
    "peak_flops": pl.Float64,
    "status": pl.String,
    "power": pl.String,  # JSON object, as in sql/raw/run_manifests.sql
    "fsdp_units": pl.String,  # JSON object: FSDP unit -> parameters
}
POWER: dict[str, pl.DataType] = {
    "study": pl.String,
    "run_id": pl.String,
    "content_hash": pl.String,
    **schema.POWER_SAMPLES,
}


def ev(
    kind: str,
    name: str,
    ts_us: float,
    dur_us: float,
    *,
    stream: int | None = None,
    launch_us: float | None = None,
    pid: str = "1",
    tid: str = "1",
    **keys: Any,
) -> dict:
    """One `events` row; times in µs (converted to integer ns exactly once, here)."""
    return {
        "kind": kind,
        "cat": kind,
        "name": name,
        "ts_unix_ns": round(ts_us * US),
        "dur_ns": round(dur_us * US),
        "pid": pid,
        "tid": tid,
        "stream": stream,
        "launch_ts_unix_ns": None if launch_us is None else round(launch_us * US),
        **keys,
    }


def kernel(
    name: str, ts_us: float, dur_us: float, *, stream: int = 7, launch_us: float | None = None, **keys: Any
) -> dict:
    """A GPU kernel on a stream, launched at launch_us (None: launch not in the trace)."""
    return ev(
        "kernel", name, ts_us, dur_us, stream=stream, launch_us=launch_us, pid="0", tid=str(stream), **keys
    )


def step(n: int, ts_us: float, dur_us: float, *, pid: str = "1", tid: str = "1", **keys: Any) -> dict:
    """One `steps` row (a ProfilerStep#n window)."""
    return {
        "step": n,
        "ts_unix_ns": round(ts_us * US),
        "dur_ns": round(dur_us * US),
        "pid": pid,
        "tid": tid,
        **keys,
    }


def _frame(rows: list[dict], columns: dict[str, pl.DataType], defaults: dict) -> pl.DataFrame:
    full = {**schema.RUN_KEYS, "content_hash": pl.String, **columns}
    filled = [{**defaults, **row} for row in rows]
    return pl.DataFrame(filled, schema=full) if filled else pl.DataFrame(schema=full)


def raw_db(*, study: str = "s", run_id: str = "r", **tables: list[dict]) -> duckdb.DuckDBPyConnection:
    """A connection holding the raw relations filled with the given rows, views created.

    Keyword arguments: events, steps, collectives, traces, manifests, power, memory (lists of rows).
    """
    con = duckdb.connect()
    fill(con, study=study, run_id=run_id, **tables)
    con.execute(
        'CREATE TABLE ingest_errors (path VARCHAR, content_hash VARCHAR, reason VARCHAR, "at" TIMESTAMPTZ)'
    )
    create_views(con)
    return con


def fill(
    con: duckdb.DuckDBPyConnection,
    *,
    events: list[dict] = (),
    steps: list[dict] = (),
    collectives: list[dict] = (),
    ops: list[dict] = (),
    op_launches: list[dict] = (),
    traces: list[dict] = (),
    manifests: list[dict] = (),
    power: list[dict] = (),
    memory: list[dict] = (),
    study: str = "s",
    run_id: str = "r",
) -> None:
    """(Re)fill every raw table; relations created earlier see the new rows (tables refreshed)."""
    defaults = {"study": study, "run_id": run_id, "rank": 0, "content_hash": "h"}
    frames = {
        "events": list(events),
        "steps": list(steps),
        "collectives_raw": list(collectives),
        "threads": [],
        "process_groups": [],
        "ops": list(ops),
        "op_launches": list(op_launches),
        "memory_events": list(memory),
    }
    for table, rows_ in frames.items():
        register(con, table, _frame(rows_, RAW_TABLES[table], defaults))
    register(con, "op_calls_raw", op_calls_of(con))
    register(con, "traces", pl.DataFrame(_traces(traces, events, defaults), schema=TRACES))
    man_defaults = {"study": study, "run_id": run_id, "dp": 1, "tp": 1, "pp": 1, "nodes": 1}
    register(
        con, "run_manifests", pl.DataFrame([{**man_defaults, **m} for m in manifests], schema=RUN_MANIFESTS)
    )
    register(
        con,
        "power_samples_raw",
        pl.DataFrame([{"study": study, "run_id": run_id, **p} for p in power], schema=POWER),
    )
    if _has_materialized(con):
        refresh(con)


def op_calls_of(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The op_calls_raw rows of the hand-made ops, op_launches and steps, per rank (what the ingest
    task computes per trace, by the same function)."""
    key = ["study", "run_id", "rank"]
    ops = con.sql(f"SELECT {', '.join(key)}, {', '.join(OPS_COLUMNS)} FROM ops").pl()
    launches = con.sql(f"SELECT {', '.join(key)}, {', '.join(LAUNCH_COLUMNS)} FROM op_launches").pl()
    steps = con.sql(f"SELECT {', '.join(key)}, {', '.join(STEP_COLUMNS)} FROM steps").pl()
    launches_of = launches.partition_by(key, as_dict=True)
    steps_of = steps.partition_by(key, as_dict=True)
    frames = [
        op_calls_frame(
            group,
            launches_of.get(values, launches.clear()),
            steps_of.get(values, steps.clear()),
            version=formulas_version(),
        ).select(*(pl.lit(v).alias(k) for k, v in zip(key, values, strict=True)), pl.all())
        for values, group in ops.partition_by(key, as_dict=True).items()
    ]
    empty = pl.DataFrame(
        schema={"study": pl.String, "run_id": pl.String, "rank": pl.Int32, **schema.OP_CALLS}
    )
    return (
        pl.concat([empty, *frames], how="diagonal_relaxed").cast({"rank": pl.Int32}).drop("formulas_version")
    )


def _traces(traces: list[dict], events: list[dict], defaults: dict) -> list[dict]:
    """The traces rows, each counting its events (n_events), plus one per rank that has events and
    no row: an ingest registers every trace it stores events of."""
    key = ("study", "run_id", "rank")
    counts = Counter(tuple({**defaults, **e}[k] for k in key) for e in events)
    rows = [{**defaults, **t} for t in traces]
    listed = {tuple(row[k] for k in key) for row in rows}
    rows += [dict(zip(key, k, strict=True)) | {"content_hash": "h"} for k in counts if k not in listed]
    return [{"n_events": counts.get(tuple(row[k] for k in key), 0), **row} for row in rows]


def register(con: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> None:
    """Store a Polars frame as a DuckDB table."""
    con.register("_frame", frame.to_arrow())
    con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _frame')
    con.unregister("_frame")


def view_files() -> list[SqlFile]:
    """Every relation file but the raw layer's (which `fill` stands in for)."""
    return [f for f in load_sql_files() if f.layer != RAW_LAYER]


# Raw tables `fill` does not stand in for: their own SQL creates them (empty) for the views that read them.
UNFILLED_RAW = ("network_curve_points", "critical_path_segments", "op_slack_rows")


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    """Run every seeds, view and materialized-table file, in their declared dependency order."""
    unfilled = [f for f in load_sql_files() if f.name in UNFILLED_RAW]
    create_relations(con, unfilled + view_files())


def refresh(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute the materialized tables from the current raw rows (what the warehouse does after ingest)."""
    create_relations(con, view_files(), only_materialized=True)


def _has_materialized(con: duckdb.DuckDBPyConnection) -> bool:
    names = [f.name for f in view_files() if f.materialized]
    found = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name IN (SELECT unnest(?))", [names]
    ).fetchall()
    return found[0][0] > 0


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict]:
    """Query result as a list of dicts."""
    rel = con.sql(sql)
    return [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]


def parsed_db(parsed: list[tuple[Any, dict]], *, events_hook=None) -> duckdb.DuckDBPyConnection:
    """A connection over ParsedTrace frames; each item is (parsed, {study, run_id, rank})."""
    con = raw_db()
    pairs = (
        ("events", "events"),
        ("steps", "steps"),
        ("collectives_raw", "collectives"),
        ("ops", "ops"),
        ("op_launches", "op_launches"),
        ("op_calls_raw", "op_calls"),
        ("memory_events", "memory_events"),
    )
    for table, attr in pairs:
        frames = []
        for trace, key in parsed:
            frame = getattr(trace, attr)
            if attr == "events" and events_hook is not None:
                frame = events_hook(frame, trace)
            frames.append(
                frame.with_columns(
                    pl.lit(key["study"]).alias("study"),
                    pl.lit(key["run_id"]).alias("run_id"),
                    pl.lit(key["rank"], pl.Int32).alias("rank"),
                    pl.lit(f"{key}").alias("content_hash"),
                )
            )
        register(con, table, pl.concat(frames, how="diagonal_relaxed"))
    refresh(con)
    return con
