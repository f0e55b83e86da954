"""Whether the registered Parquet partitions are still what was written: missing, truncated, altered.

`parquet_files` records each partition's rows, size and CRC-32 as its worker wrote it. An ingest
looks at every partition's size (a `stat` each: milliseconds for thousands), and reads every byte
and footer of the partitions of the files it is given again (the same paths), then parses again
the files whose partitions are damaged, re-writing them ("repaired"). `tracehouse check` reads
every byte (CRC-32) and every footer (row count). Partitions
registered by an older tracehouse have no size or CRC-32: only their existence and rows are checked.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import duckdb
from tracehouse.pipeline.common.errors import one_line
from tracehouse.pipeline.ingest.catalog import footer_rows
from tracehouse.pipeline.warehouse.partitions import file_crc32

# Each registered partition with the source file it came from (a trace or a power log).
_PARTITIONS = """
SELECT p.path, p.table_name, p.content_hash, p.n_rows, p.size_bytes, p.crc32, s.path AS source
FROM parquet_files AS p
LEFT JOIN (SELECT content_hash, path FROM traces UNION ALL SELECT content_hash, path FROM power_files) AS s
    ON s.content_hash = p.content_hash
ORDER BY p.path
"""


@dataclass(frozen=True, kw_only=True)
class Damage:
    """One registered partition that is not what its worker wrote, and the source file that re-writes it."""

    path: str  # relative to the warehouse
    table: str
    content_hash: str
    source: str | None  # the trace or power log it was written from, as ingested
    problem: str  # one line: missing, truncated, checksum, rows

    def line(self) -> str:
        """`PATH (table, from SOURCE): PROBLEM`."""
        return f"{self.path} ({self.table} of {self.source or self.content_hash}): {self.problem}"


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """What `check_warehouse` verified and found damaged."""

    partitions: int
    damaged: list[Damage]

    @property
    def sources(self) -> list[str]:
        """The source files whose ingest again repairs the damage (unknown sources left out)."""
        return sorted({d.source for d in self.damaged if d.source})


def check_warehouse(warehouse_dir: str | Path) -> CheckResult:
    """Verify every registered partition (exists, size, CRC-32, footer rows), reading the warehouse only."""
    from tracehouse.pipeline.warehouse.database import connect

    with connect(Path(warehouse_dir), read_only=True) as connection:
        n = connection.sql("SELECT count(*) FROM parquet_files").fetchall()[0][0]
        return CheckResult(
            partitions=n, damaged=damaged_partitions(connection, Path(warehouse_dir), deep=True)
        )


@dataclass(frozen=True, kw_only=True)
class _Registered:
    path: str
    table: str
    content_hash: str
    n_rows: int
    size_bytes: int | None
    crc32: int | None
    source: str | None


def damaged_partitions(
    connection: duckdb.DuckDBPyConnection,
    warehouse_dir: Path,
    *,
    deep: bool,
    deep_sources: Collection[str] = (),
) -> list[Damage]:
    """Every registered partition that is missing or of another size; other bytes or rows too where
    `deep`, or where it was written from one of `deep_sources` (source paths as ingested)."""
    rows = connection.sql(_PARTITIONS).fetchall()
    registered = [_Registered(**dict(zip(_FIELDS, row, strict=True))) for row in rows]
    sources = set(deep_sources)
    found: list[Damage] = []
    intact: list[_Registered] = []
    for p in registered:
        thorough = deep or p.source in sources
        problem = _stat_problem(Path(warehouse_dir) / p.path, p) or (
            _bytes_problem(Path(warehouse_dir) / p.path, p) if thorough else None
        )
        if problem is not None:
            found.append(_damage(p, problem))
        elif thorough:
            intact.append(p)
    found.extend(_row_problems(connection, warehouse_dir, intact))
    return sorted(found, key=lambda d: d.path)


_FIELDS = ("path", "table", "content_hash", "n_rows", "size_bytes", "crc32", "source")


def _damage(p: _Registered, problem: str) -> Damage:
    return Damage(path=p.path, table=p.table, content_hash=p.content_hash, source=p.source, problem=problem)


def _stat_problem(path: Path, p: _Registered) -> str | None:
    """Missing, unreadable or of another size than written, else None."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if p.size_bytes is not None and size != p.size_bytes:
        return f"{size:,} bytes, {p.size_bytes:,} were written"
    return None


def _bytes_problem(path: Path, p: _Registered) -> str | None:
    """Other bytes than written (CRC-32), else None."""
    if p.crc32 is None:
        return None
    try:
        crc = file_crc32(path)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    return None if crc == p.crc32 else "its bytes differ from those written (CRC-32)"


def _row_problems(
    connection: duckdb.DuckDBPyConnection, warehouse_dir: Path, partitions: list[_Registered]
) -> list[Damage]:
    """The partitions whose Parquet footer cannot be read or counts other rows than registered.

    All footers in one query (`catalog.footer_rows`, as registration reads them); only when that
    fails are they read one by one, so that a footer that fails names its own file.
    """
    if not partitions:
        return []
    try:
        seen = footer_rows(connection, warehouse_dir, [p.path for p in partitions])
    except duckdb.Error:
        seen = {}
        for p in partitions:
            try:
                seen.update(footer_rows(connection, warehouse_dir, [p.path]))
            except duckdb.Error as exc:
                seen[p.path] = one_line(exc)
    found = []
    for p in partitions:
        rows = seen.get(p.path)
        if isinstance(rows, str) or rows is None:
            found.append(_damage(p, f"is no readable Parquet file: {rows or 'no footer'}"))
        elif rows != p.n_rows:
            found.append(_damage(p, f"{rows:,} rows, {p.n_rows:,} were registered"))
    return found
