"""Worker side of ingest: write one source file's rows of each table to its Parquet partition.

Each partition is written under a temporary name and renamed into place, so a reader (or an
interrupted ingest) never sees half a file.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import polars as pl
from tracehouse.pipeline.warehouse import PARQUET_TABLES, partition_file


def write_partition(
    warehouse_dir: Path, table: str, frame: pl.DataFrame, keys: dict[str, Any]
) -> tuple[str, str, int] | None:
    """Write one table's rows of one file (keys added as columns) to its final Parquet name."""
    if frame.height == 0:
        return None
    columns = PARQUET_TABLES[table]
    missing = [c for c in columns if c not in keys and c not in frame.columns]
    if missing:
        raise ValueError(f"parser output for {table} lacks columns {', '.join(missing)}")
    out = frame.select(
        [pl.lit(value, dtype=columns[key]).alias(key) for key, value in keys.items()]
        + [pl.col(c).cast(t) for c, t in columns.items() if c not in keys]
    )
    relative = partition_file(
        table,
        study=keys["study"],
        run_id=keys["run_id"],
        rank=keys.get("rank"),
        content_hash=keys["content_hash"],
    )
    target = Path(warehouse_dir) / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex}")
    try:
        out.write_parquet(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return table, relative, out.height


def write_all(
    warehouse_dir: Path, frames: dict[str, pl.DataFrame], keys: dict[str, Any]
) -> tuple[tuple[str, str, int], ...]:
    """Write every table's partition of one file; on failure delete the ones already written."""
    written: list[tuple[str, str, int]] = []
    try:
        for table, frame in frames.items():
            entry = write_partition(warehouse_dir, table, frame, keys)
            if entry is not None:
                written.append(entry)
    except BaseException:
        for _, relative, _ in written:
            (Path(warehouse_dir) / relative).unlink(missing_ok=True)
        raise
    return tuple(written)
