"""The query sandbox: a read connection that can read the warehouse and nothing else, and write nothing.

`tracehouse query`, `tracehouse.open(...).sql()` and the report read through it. A filter of
statement types is not enough (`EXPLAIN ANALYZE COPY ... TO` passes one), so the controls are
DuckDB's own: external access off (no file, no URL, no extension install or load, no ATTACH),
then the configuration locked, so no statement can turn it back on.

With external access off DuckDB reads no file at all, also not the warehouse's Parquet
partitions; and a file or directory it would let the query read, it would also let it write
(`COPY ... TO 'partition' (USE_TMP_FILE false)` over an allowed path). So the raw Parquet views
(`events`, `steps`, ...) are shadowed by TEMP views of the same SQL over an Arrow dataset of the
registered partitions, which pyarrow reads on DuckDB's behalf: the query reads those files and
no other, and cannot write them. The public views read tables stored in the DuckDB file, so
most queries never touch Parquet: the shadows are made on the first statement that needs them
(`sealed`), which spares the others pyarrow's import (0.5 s).

A user who wants to read other files says so: `allow` names directories whose files queries
may read (DuckDB's `allowed_directories`; it lets them write there too, which the option's
help says).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError, one_line
from tracehouse.pipeline.warehouse.partitions import EMPTY_NAME, PARQUET_DIR
from tracehouse.pipeline.warehouse.sql_runner import RAW_LAYER, load_sql_files

T = TypeVar("T")
_PARQUET_SCAN = re.compile(r"read_parquet\('(?P<folder>parquet/[a-z_]+)/\*\*/\*\.parquet'[^)]*\)")
# The settings a sealed connection starts with (set before the configuration is locked).
SEALED = (
    "SET autoinstall_known_extensions = false",
    "SET autoload_known_extensions = false",
    "SET enable_external_access = false",
    "SET lock_configuration = true",
)


def seal(connection: duckdb.DuckDBPyConnection, warehouse_dir: Path, *, allow: Iterable[Path] = ()) -> None:
    """Make a read connection read the warehouse only: external access off, then the configuration locked."""
    try:
        allowed = [f"{Path(d).resolve()}/" for d in allow]
        if allowed:
            connection.execute("SET allowed_directories = ?", [allowed])
        for statement in SEALED:
            connection.execute(statement)
    except duckdb.Error as exc:
        reason = one_line(exc)
        raise WarehouseError(f"{warehouse_dir}: cannot open the warehouse for queries: {reason}") from exc


def sealed(connection: duckdb.DuckDBPyConnection, warehouse_dir: Path, run: Callable[[], T]) -> T:
    """`run()` on a sealed connection; if it needed the Parquet views, again once they read through Arrow."""
    try:
        return run()
    except duckdb.PermissionException as exc:
        if not _reads_parquet_views(exc) or _shadowed(connection):
            raise
    shadow_parquet_views(connection, warehouse_dir)
    return run()


def shadow_parquet_views(connection: duckdb.DuckDBPyConnection, warehouse_dir: Path) -> None:
    """Shadow every raw Parquet view by a TEMP view over an Arrow dataset of its registered partitions."""
    warehouse = Path(warehouse_dir).resolve()
    for f in load_sql_files():
        match = _PARQUET_SCAN.search(f.text) if f.layer == RAW_LAYER else None
        if match is not None:
            _shadow(connection, warehouse, f.name, f.text, match)


def _reads_parquet_views(exc: duckdb.Error) -> bool:
    """Whether DuckDB refused a raw Parquet view's own files (a relative `parquet/...` glob)."""
    return f'"{PARQUET_DIR}/' in str(exc)


def _shadowed(connection: duckdb.DuckDBPyConnection) -> bool:
    rows = connection.execute(
        "SELECT 1 FROM duckdb_views() WHERE temporary AND view_name = 'events'"
    ).fetchall()
    return bool(rows)


def _shadow(
    connection: duckdb.DuckDBPyConnection, warehouse: Path, name: str, text: str, match: re.Match[str]
) -> None:
    """A TEMP view of a raw Parquet view, reading its registered partitions through an Arrow dataset."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    folder = match["folder"]
    table = folder.split("/", 1)[1]
    registered = connection.execute(
        "SELECT path FROM parquet_files WHERE table_name = ? ORDER BY path", [table]
    ).fetchall()
    empty = warehouse / PARQUET_DIR / table / EMPTY_NAME
    schema = pq.read_schema(empty)
    schema = pa.schema([f.with_type(_plain(f.type)) for f in schema])  # text read as text, not ENUM
    files = [str(empty), *(str(warehouse / p) for (p,) in registered)]
    arrow_name = f"__sealed_{name}"
    connection.register(arrow_name, ds.dataset(files, schema=schema, format="parquet"))
    view = text[: match.start()] + arrow_name + text[match.end() :]
    header = f"CREATE OR REPLACE VIEW {name} AS"
    connection.execute(view.replace(header, f"CREATE OR REPLACE TEMP VIEW {name} AS", 1))


def _plain(kind: object) -> object:
    """A dictionary-encoded Arrow type as its value type (Parquet text written from Categorical)."""
    import pyarrow as pa

    return kind.value_type if pa.types.is_dictionary(kind) else kind
