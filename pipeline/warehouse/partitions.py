"""The warehouse's Parquet side: its tables, their columns, where each source file's rows live.

Every key column is also stored inside each Parquet file (the folder names are for people and
tools; the views read with hive_partitioning off):

    DIR/parquet/<table>/_empty.parquet                     schema only, see `write_empty_partitions`
    DIR/parquet/<table>/study=S/run_id=R/rank=N/<hash>.parquet    one file per rank trace
    DIR/parquet/power_samples/study=S/run_id=R/<hash>.parquet     one file per power log

Ingest's workers write partitions and never open DuckDB, so this module does not import it (a
worker process starts 0.06 s sooner without; `database` holds the DuckDB side).
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

import polars as pl
from tracehouse.pipeline.warehouse import schema

PARQUET_DIR = "parquet"
EMPTY_NAME = "_empty.parquet"

_TRACE_KEYS: dict[str, pl.DataType] = {**schema.RUN_KEYS, "content_hash": pl.String}
_POWER_KEYS: dict[str, pl.DataType] = {"study": pl.String, "run_id": pl.String, "content_hash": pl.String}

# Parquet folder name -> the full column list stored in its files (keys first).
PARQUET_TABLES: dict[str, dict[str, pl.DataType]] = {
    "events": {**_TRACE_KEYS, **schema.EVENTS},
    "steps": {**_TRACE_KEYS, **schema.STEPS},
    "collectives": {**_TRACE_KEYS, **schema.COLLECTIVES},
    "threads": {**_TRACE_KEYS, **schema.THREADS},
    "process_groups": {**_TRACE_KEYS, **schema.PROCESS_GROUPS},
    "ops": {**_TRACE_KEYS, **schema.OPS},
    "op_launches": {**_TRACE_KEYS, **schema.OP_LAUNCHES},
    "op_calls": {**_TRACE_KEYS, **schema.OP_CALLS},
    "memory_events": {**_TRACE_KEYS, **schema.MEMORY_EVENTS},
    "power_samples": {**_POWER_KEYS, **schema.POWER_SAMPLES},
}
TRACE_TABLES = (
    "events",
    "steps",
    "collectives",
    "threads",
    "process_groups",
    "ops",
    "op_launches",
    "op_calls",
    "memory_events",
)
CHECKSUM_CHUNK = 1 << 20


class Partition(NamedTuple):
    """One Parquet partition as written: what `parquet_files` records to register and later verify it."""

    table: str
    path: str  # relative to the warehouse directory
    n_rows: int
    size_bytes: int
    crc32: int  # of the file's bytes (zlib.crc32)


def file_crc32(path: Path) -> int:
    """The CRC-32 of a file's bytes (zlib's, as `parquet_files.crc32` records it)."""
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHECKSUM_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def partition_file(table: str, *, study: str, run_id: str, rank: int | None, content_hash: str) -> str:
    """The Parquet file of one source file's rows of one table, relative to the warehouse."""
    parts = [PARQUET_DIR, table, f"study={quote(study, safe='')}", f"run_id={quote(run_id, safe='')}"]
    if rank is not None:
        parts.append(f"rank={rank}")
    return "/".join([*parts, f"{content_hash}.parquet"])


def duckdb_file(warehouse_dir: Path | str, relative: str) -> str:
    """A warehouse file's path as DuckDB reads that one file: absolute, glob characters escaped.

    Relative, DuckDB would look for it in the current directory first (a file of that name
    there would be read instead); absolute and unescaped, it would expand it as a glob
    (`wh[1]/...` read `wh1/...`).
    """
    absolute = os.path.join(os.path.abspath(warehouse_dir), relative)
    return re.sub(r"[\[*?]", lambda char: f"[{char[0]}]", absolute)


def write_empty_partitions(warehouse_dir: Path) -> None:
    """Write one schema-only Parquet file per table.

    DuckDB's `read_parquet` fails when its glob matches no file, so a fresh warehouse's views
    would be unusable; a zero-row file with the full schema keeps every glob non-empty and
    fixes the column types even before the first ingest.
    """
    for table, columns in PARQUET_TABLES.items():
        target = Path(warehouse_dir) / PARQUET_DIR / table / EMPTY_NAME
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(EMPTY_NAME + ".tmp")
            schema.empty_frame(columns).write_parquet(tmp)
            tmp.replace(target)


def sql_literal(text: str) -> str:
    """A SQL string literal of the text (quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def listed_files(warehouse_dir: Path | str, folder: str, paths: list[str]) -> str:
    """The SQL list of a Parquet folder's files as DuckDB reads them one by one (`duckdb_file`), its
    schema-only file first: the list is never empty and the column types stay fixed."""
    files = [f"{folder}/{EMPTY_NAME}", *paths]
    return "[" + ", ".join(sql_literal(duckdb_file(warehouse_dir, f)) for f in files) + "]"
