"""Small hand-written rank traces and warehouse comparisons for the warehouse tests."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import duckdb

BASE_NS = 1_700_000_000_000_000_000

# Every table whose whole contents two equivalent ingests must share (ingested_at / at excluded).
CONTENT_TABLES = (
    "events",
    "steps",
    "collectives_raw",
    "threads",
    "process_groups",
    "ops",
    "op_launches",
    "memory_events",
    "power_samples_raw",
    "traces",
    "run_manifests",
    "parquet_files",
    "ingest_errors",
    "power_files",
)


def gpu_events(n_kernels: int, *, start_us: float = 0.0) -> list[dict[str, Any]]:
    """One ProfilerStep#1 window with n launches and n kernels (each 10 µs, 5 µs apart)."""
    events: list[dict[str, Any]] = [
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": start_us,
            "dur": 20.0 * n_kernels + 100,
        },
    ]
    for i in range(n_kernels):
        t = start_us + 1 + 20.0 * i
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 3.0,
                "args": {"correlation": i + 1},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"gemm_{i}",
                "pid": 0,
                "tid": 7,
                "ts": t + 5,
                "dur": 10.0,
                "args": {"stream": 7, "device": 0, "correlation": i + 1},
            }
        )
    return events


def write_trace(
    path: Path,
    *,
    rank: int | None,
    n_kernels: int = 3,
    world_size: int = 2,
    start_us: float = 0.0,
    extra_events: list[dict[str, Any]] | None = None,
) -> Path:
    """A small GPU rank trace (gzip when the name ends in .gz); rank None: no distributedInfo."""
    doc: dict[str, Any] = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
    doc["traceEvents"] = gpu_events(n_kernels, start_us=start_us) + (extra_events or [])
    data = json.dumps(doc).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


def query(warehouse: Path, sql: str, params: list | None = None) -> list[tuple]:
    """The rows of one query (read-only connection)."""
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as c:
        c.execute("SET file_search_path = ?", [str(warehouse)])
        return c.execute(sql, params or []).fetchall()


def count(warehouse: Path, relation: str) -> int:
    """Rows in one relation (read-only connection)."""
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as c:
        c.execute("SET file_search_path = ?", [str(warehouse)])
        return c.sql(f"SELECT count(*) FROM {relation}").fetchall()[0][0]


def checksums(warehouse: Path, *, without: tuple[str, ...] = ()) -> dict[str, tuple[int, int | None]]:
    """Per table: row count and an order-independent checksum over all columns but ingest times
    (and the columns named in `without`)."""
    out = {}
    skipped = ("ingested_at", "at", *without)
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as c:
        c.execute("SET file_search_path = ?", [str(warehouse)])
        for table in CONTENT_TABLES:
            names = [r[0] for r in c.sql(f"DESCRIBE {table}").fetchall() if r[0] not in skipped]
            cols = ", ".join(f'"{n}"' for n in names)
            row = c.sql(f"SELECT count(*), sum(hash(x)) FROM (SELECT {cols} FROM {table}) x").fetchall()[0]
            out[table] = (row[0], None if row[1] is None else int(row[1]))
    return out


def relation_names() -> list[str]:
    """Every materialized table and every view of the packaged tree (the raw layer and seeds aside)."""
    from tracehouse.pipeline.warehouse.sql_runner import RAW_LAYER, load_sql_files

    return [f.name for f in load_sql_files() if f.layer != RAW_LAYER and not f.seeded]


def relation_contents(warehouse: Path) -> dict[str, list[tuple]]:
    """Every relation's rows, sorted (read-only)."""
    from tracehouse.pipeline.warehouse.database import connect

    with connect(warehouse, read_only=True) as c:
        return relation_rows(c)


def relation_rows(c) -> dict[str, list[tuple]]:
    return {name: c.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in relation_names()}


def same_row(a: tuple, b: tuple, *, exact: bool) -> bool:
    """Equal rows; in a view a DOUBLE may differ in its last bits (a float sum over rows stored in
    another order), so there it is compared to 1e-12 relative."""
    if exact or a == b:
        return a == b
    return len(a) == len(b) and all(
        x == y or (isinstance(x, float) and isinstance(y, float) and math.isclose(x, y, rel_tol=1e-12))
        for x, y in zip(a, b, strict=True)
    )
