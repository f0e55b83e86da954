"""The warehouse directory: `tracehouse.duckdb` (catalog, small tables, views) plus Parquet partitions.

Layout:

    DIR/tracehouse.duckdb
    DIR/parquet/...        the Parquet side, laid out as `partitions` says
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError, one_line
from tracehouse.pipeline.warehouse.meta import read_meta, write_meta
from tracehouse.pipeline.warehouse.partitions import PARQUET_DIR, write_empty_partitions
from tracehouse.pipeline.warehouse.refresh import changed_runs, overlay_runs, refresh_runs, run_stamps
from tracehouse.pipeline.warehouse.sql_runner import (
    FILLED,
    FILLED_VERSIONS,
    RAW_LAYER,
    SEEDS,
    SqlFile,
    create_relations,
    fill_seed,
    load_sql_files,
)
from tracehouse.pipeline.warehouse.view_docs import comment_statements, contracts_by_relation

DB_NAME = "tracehouse.duckdb"
# The folder of the empty catalogs new warehouses are copied from (default: ~/.cache/tracehouse).
CACHE_VARIABLE = "TRACEHOUSE_CACHE"
# An ingest holds the file for writing only in short catalog phases; a reader waits them out.
READ_WAIT_S = 3.0
LOCK_RETRY_S = 0.05  # between attempts to open a file another process holds
# DuckDB's memory_limit for every connection tracehouse opens (e.g. "4GB"); unset: DuckDB's
# default, 80% of the machine's memory. benchmarks/study.py sets it to bound a big study's RSS.
MEMORY_LIMIT_VARIABLE = "TRACEHOUSE_DUCKDB_MEMORY_LIMIT"
# The name a query-only in-memory database gives the attached warehouse (see `open_in_memory`):
# the one DuckDB gives the file when it opens it directly, so qualified names work either way.
ATTACHED = Path(DB_NAME).stem

# What every run's materialized rows depend on alike (the built-in communication vocabulary and
# the user's comm kernel patterns): a change recomputes every run. The rest is per run
# (refresh.RUN_STAMPS: its registered trace and power files, its manifest). Both digests are
# stored with the tables; comparing them costs milliseconds.
_GLOBAL_STAMP = """
SELECT md5(concat_ws('|',
    (SELECT coalesce(string_agg(concat(pattern, '=', note), ',' ORDER BY pattern, note), '')
        FROM comm_kernel_patterns),
    (SELECT coalesce(string_agg(concat(kind, '=', pattern), ',' ORDER BY kind, pattern), '')
        FROM comm_vocabulary)
))
"""
# What DuckDB says when this process already holds the file in the other mode (held_in_this_process).
_HELD_HERE_SIGNS = ("different configuration than existing connections", "Unique file handle conflict")
# A commit that writes the materialized tables checkpoints (see `transaction`): any log size.
CHECKPOINT_AT_COMMIT = "0b"


def db_path(warehouse_dir: Path) -> Path:
    """The DuckDB file of a warehouse directory."""
    return Path(warehouse_dir) / DB_NAME


def connect(
    warehouse_dir: Path, *, read_only: bool = False, wait_s: float | None = None
) -> duckdb.DuckDBPyConnection:
    """Open an existing warehouse's DuckDB file, resolving the views' relative paths against it.

    While another process holds the file, the open is retried for up to `wait_s` seconds
    (default: READ_WAIT_S for a reader, none for a writer), then fails with a one-line `busy`.
    """
    path = db_path(warehouse_dir)
    if not path.is_file():
        raise WarehouseError(
            f"{warehouse_dir}: no warehouse here (no {DB_NAME}); "
            "create one with tracehouse ingest (tracehouse.ingest in Python)"
        )
    try:
        wait_s = (READ_WAIT_S if read_only else 0.0) if wait_s is None else wait_s
        connection = _open_duckdb(path, read_only=read_only, wait_s=wait_s)
    except duckdb.Error as exc:
        raise open_error(warehouse_dir, exc, read_only=read_only) from exc
    return _configured(connection, warehouse_dir)


def _configured(connection: duckdb.DuckDBPyConnection, warehouse_dir: Path) -> duckdb.DuckDBPyConnection:
    """The connection, with the views' relative paths resolved against the warehouse directory.

    Closed if the settings fail: a connection left open would make every later open of the
    file in this process fail with DuckDB's "different configuration" error.
    """
    with closed_on_error(connection):
        connection.execute("SET file_search_path = ?", [str(Path(warehouse_dir).resolve())])
        quiet_progress(connection)
    return connection


def quiet_progress(connection: duckdb.DuckDBPyConnection) -> None:
    """Turn DuckDB's own progress bar off where it is on (tracehouse reports its own progress).

    Only where it is on: in a Jupyter kernel without ipywidgets DuckDB starts with it off and
    refuses any SET of it (InvalidInputException naming ipywidgets).
    """
    on = connection.execute("SELECT current_setting('enable_progress_bar')").fetchall()[0][0]
    if on:
        connection.execute("SET enable_progress_bar = false")


@contextmanager
def closed_on_error(connection: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """The connection, closed if the block raises (the caller keeps it only when the block completes)."""
    try:
        yield connection
    except BaseException:
        connection.close()
        raise


def _open_duckdb(path: Path, *, read_only: bool, wait_s: float) -> duckdb.DuckDBPyConnection:
    """The DuckDB file opened, retried for up to wait_s seconds while another process holds it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=duckdb_config())
        except duckdb.Error as exc:
            if not is_locked(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(LOCK_RETRY_S)


def duckdb_config() -> dict[str, str]:
    """Settings for every DuckDB connection: the memory limit from TRACEHOUSE_DUCKDB_MEMORY_LIMIT, if set."""
    limit = os.environ.get(MEMORY_LIMIT_VARIABLE)
    return {"memory_limit": limit} if limit else {}


def open_error(warehouse_dir: Path, exc: duckdb.Error, *, read_only: bool) -> WarehouseError:
    """The one-line error for a DuckDB file that would not open: held in this process, busy, or else."""
    if held_in_this_process(exc):
        return WarehouseError(_held_here(warehouse_dir, read_only=read_only))
    if not is_locked(exc):
        return WarehouseError(f"{db_path(warehouse_dir)}: cannot open: {one_line(exc)}")
    if read_only:
        return WarehouseError(
            f"{warehouse_dir}: busy: another tracehouse process (an ingest?) has been writing it for "
            f"over {READ_WAIT_S:g} s; retry when it finishes"
        )
    return WarehouseError(
        f"{warehouse_dir}: busy: another process (a query or an ingest?) has it open; retry when it finishes"
    )


def held_in_this_process(exc: BaseException | None) -> bool:
    """Whether DuckDB refused because this process holds the file open in the other mode (read-only/write).

    Opened directly, DuckDB says "different configuration"; attached to another database (a
    stale warehouse read in memory, see `open_in_memory`), "Unique file handle conflict".
    """
    return isinstance(exc, duckdb.Error) and any(sign in str(exc) for sign in _HELD_HERE_SIGNS)


def _held_here(warehouse_dir: Path, *, read_only: bool) -> str:
    """What holds the file in this process, and what to do, in one sentence."""
    if read_only:  # the holder writes: an ingest, or a read-write duckdb.connect of the user's
        return (
            f"{warehouse_dir}: this Python process has the warehouse open for writing (an ingest under "
            "way, or a read-write duckdb.connect); wait for the ingest or close that connection, then open it"
        )
    return (
        f"{warehouse_dir}: this Python process has the warehouse open read-only (a tracehouse.open "
        "handle, or a read-only duckdb.connect); call its close() (wh.close()) first, then ingest"
    )


def is_locked(exc: BaseException | None) -> bool:
    """Whether DuckDB failed because another process holds the file's lock."""
    return isinstance(exc, duckdb.Error) and (
        "Could not set lock" in str(exc) or "Conflicting lock" in str(exc)
    )


def create_warehouse(warehouse_dir: Path, *, wait_s: float = 0.0) -> Path:
    """Create (or complete) a warehouse directory with its raw tables and views; return its path.

    Waits up to wait_s seconds for readers holding the file (a new catalog is readable as soon as
    it is copied into place), then fails with the one-line `busy`.

    A new catalog starts as a copy of an empty one with every relation, made once per SQL tree and
    DuckDB version in the cache folder (`TRACEHOUSE_CACHE`, else ~/.cache/tracehouse): creating
    the ~60 views and their comments costs about a second, which would dominate a small ingest.
    """
    warehouse_dir = make_warehouse_dir(warehouse_dir)
    existed = db_path(warehouse_dir).exists()
    try:
        write_empty_partitions(warehouse_dir)
        if not existed:
            _copy_template(warehouse_dir)
        # opened once, created if absent (a second open costs a checkpoint and 15 ms more)
        connection = _open_duckdb(db_path(warehouse_dir), read_only=False, wait_s=wait_s)
    except duckdb.Error as exc:
        if existed or is_locked(exc):
            raise open_error(warehouse_dir, exc, read_only=False) from exc
        raise WarehouseError(f"{warehouse_dir}: cannot create the warehouse: {one_line(exc)}") from exc
    except OSError as exc:
        raise WarehouseError(f"{warehouse_dir}: cannot create the warehouse: {_reason(exc)}") from exc
    with _configured(connection, warehouse_dir):
        create_raw_relations(connection)
    return warehouse_dir


def _template_dir() -> Path:
    """Where the empty catalogs are kept: $TRACEHOUSE_CACHE, else the user's cache folder."""
    if chosen := os.environ.get(CACHE_VARIABLE):
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracehouse"


def _copy_template(warehouse_dir: Path) -> None:
    """Put a copy of the empty catalog of this SQL tree and DuckDB version at the warehouse's DuckDB
    path, building the template first if there is none; nothing where the cache folder cannot be
    written (the relations are then created in place, as the caller goes on to do)."""
    name = f"catalog-{duckdb.__version__}-{sql_digest(load_sql_files())[:20]}.duckdb"
    template = _template_dir() / name
    try:
        if not template.is_file():
            _build_template(template)
        # copied beside and moved into place whole: a reader never opens half a catalog
        partial = db_path(warehouse_dir).with_suffix(".copying")
        shutil.copyfile(template, partial)
        os.replace(partial, db_path(warehouse_dir))
    except (OSError, duckdb.Error, WarehouseError):
        db_path(warehouse_dir).with_suffix(".copying").unlink(missing_ok=True)
        db_path(warehouse_dir).unlink(missing_ok=True)


def _build_template(template: Path) -> None:
    """An empty warehouse's catalog with every relation, built in a scratch folder beside the
    template and moved into place whole (two processes building at once both leave a valid one)."""
    template.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=template.parent, prefix=".building-") as scratch:
        folder = Path(scratch)
        write_empty_partitions(folder)
        connection = _configured(_open_duckdb(db_path(folder), read_only=False, wait_s=0.0), folder)
        try:
            create_views(connection)
        finally:
            connection.close()
        os.replace(db_path(folder), template)


def make_warehouse_dir(warehouse_dir: Path) -> Path:
    """The warehouse directory, created if absent (with its parents); WarehouseError if it cannot be."""
    warehouse_dir = Path(warehouse_dir)
    if "," in str(warehouse_dir.resolve()):  # the views find their Parquet through file_search_path
        raise WarehouseError(
            f"{warehouse_dir}: cannot create the warehouse: its path has a comma, which DuckDB's "
            "file_search_path takes for a separator; choose another folder"
        )
    if warehouse_dir.exists() and not warehouse_dir.is_dir():
        raise WarehouseError(f"{warehouse_dir}: exists and is not a directory")
    try:
        warehouse_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WarehouseError(f"{warehouse_dir}: cannot create the warehouse: {_reason(exc)}") from exc
    return warehouse_dir


def is_new_warehouse(warehouse_dir: Path) -> bool:
    """Whether the directory holds no catalog and no Parquet folder: nothing registered, no orphans."""
    return not db_path(warehouse_dir).exists() and not (Path(warehouse_dir) / PARQUET_DIR).exists()


def _reason(exc: OSError) -> str:
    return exc.strerror or one_line(exc)


def create_views(connection: duckdb.DuckDBPyConnection, *, force: bool = False) -> list[str]:
    """(Re)create every relation of the packaged sql tree on a read-write connection.

    Skipped when the catalog already holds them all, built from the same SQL text: binding
    the analysis views takes about a second, which would dominate small ingests. The
    materialized tables are then still refreshed for the runs whose inputs changed since.
    """
    files = load_sql_files()
    digest = sql_digest(files)
    if not force and not missing_relations(connection) and read_meta(connection, "sql_digest") == digest:
        for name in SEEDS:  # rows edited by hand go back (and change the inputs stamp)
            fill_seed(connection, name)
        for fill in FILLED.values():  # before the materialized tables that read them
            fill(connection)
        refresh_materialized(connection, files)
        return []
    with transaction(connection, checkpoint=True):  # all or nothing; one commit for ~100 files
        names = create_relations(connection, files)
        write_meta(connection, "sql_digest", digest)
        _record_stamps(connection)
    return names


def refresh_materialized(
    connection: duckdb.DuckDBPyConnection, files: list[SqlFile] | None = None
) -> list[str]:
    """Recompute the materialized tables where their inputs changed; return the names recomputed.

    Only the runs whose inputs changed (files registered or removed, manifest) are recomputed,
    in one transaction with the new stamps; a change of what all runs share (the seeded
    vocabulary, comm_kernel_patterns) recomputes everything.
    """
    stamp = inputs_stamp(connection)
    if read_meta(connection, "inputs_stamp") == stamp:
        return []
    files = files if files is not None else load_sql_files()
    before = _stored_run_stamps(connection)
    if not before or read_meta(connection, "global_stamp") != global_stamp(connection):  # none reflected yet
        with transaction(connection, checkpoint=True):
            names = create_relations(connection, files, only_materialized=True)
            _record_stamps(connection)
        return names
    with transaction(connection, checkpoint=True):
        names = refresh_runs(connection, files, changed_runs(run_stamps(connection), before))
        _record_stamps(connection)
    return names


def refresh_runs_now(connection: duckdb.DuckDBPyConnection, runs: set[tuple[str, str]]) -> list[str]:
    """Recompute (or drop) these runs' materialized rows, record the stamps, in the caller's transaction."""
    names = refresh_runs(connection, load_sql_files(), runs)
    _record_stamps(connection)
    return names


@contextmanager
def transaction(connection: duckdb.DuckDBPyConnection, *, checkpoint: bool = False) -> Iterator[None]:
    """Run the block in one transaction: committed if it completes, rolled back if it raises.

    checkpoint: the commit writes the changes straight into the database file (a checkpoint)
    instead of the write-ahead log, which the next checkpoint, at the latest when the file is
    closed, would copy into the file again. For a transaction that writes the materialized tables:
    measured on the dev VM, a new warehouse of 8 ranks x 197k events committed and closed in
    0.13 s instead of 0.2 s (the log holds the 117k rows of `gpu_events`).
    """
    connection.execute("BEGIN TRANSACTION")
    try:
        yield
        if checkpoint:
            with _checkpoint_threshold(connection, CHECKPOINT_AT_COMMIT):
                connection.execute("COMMIT")
        else:
            connection.execute("COMMIT")
    except BaseException:
        with suppress(duckdb.Error):  # (a COMMIT that failed may have ended it already)
            connection.execute("ROLLBACK")
        raise


@contextmanager
def _checkpoint_threshold(connection: duckdb.DuckDBPyConnection, threshold: str) -> Iterator[None]:
    """DuckDB's checkpoint_threshold (the log size from which a commit checkpoints) within the block."""
    before = connection.execute("SELECT current_setting('checkpoint_threshold')").fetchall()[0][0]
    connection.execute(f"SET checkpoint_threshold = '{threshold}'")
    try:
        yield
    finally:
        connection.execute(f"SET checkpoint_threshold = '{before}'")


def inputs_stamp(connection: duckdb.DuckDBPyConnection) -> str:
    """A digest of everything the materialized tables are computed from."""
    runs = sorted([*key, stamp] for key, stamp in run_stamps(connection).items())
    return hashlib.sha256(json.dumps([global_stamp(connection), runs]).encode()).hexdigest()


def global_stamp(connection: duckdb.DuckDBPyConnection) -> str:
    """A digest of the inputs every run's materialized rows share (vocabulary, kernel patterns)."""
    return connection.execute(_GLOBAL_STAMP).fetchall()[0][0]


def _record_stamps(connection: duckdb.DuckDBPyConnection) -> None:
    """Store the stamps of the inputs the materialized tables now reflect."""
    write_meta(connection, "inputs_stamp", inputs_stamp(connection))
    write_meta(connection, "global_stamp", global_stamp(connection))
    runs = sorted([study, run_id, stamp] for (study, run_id), stamp in run_stamps(connection).items())
    write_meta(connection, "run_stamps", json.dumps(runs))


def _stored_run_stamps(connection: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], str] | None:
    """The per-run stamps the materialized tables reflect (None: a warehouse that kept none)."""
    text = read_meta(connection, "run_stamps")
    return None if text is None else {(study, run_id): stamp for study, run_id, stamp in json.loads(text)}


def create_raw_relations(connection: duckdb.DuckDBPyConnection) -> list[str]:
    """Create the raw layer only (tables ingest writes to); cheap, safe to repeat.

    The Parquet views are left as they are when the warehouse was built from this SQL: creating
    one binds it, which reads the schema of every Parquet file (union_by_name), about 0.05 s per
    view at 5,000 files, on every ingest. The tables' files always run (they add new columns).
    """
    files = load_sql_files()
    raw = [f for f in files if f.layer == RAW_LAYER]
    tables = connection.sql("SELECT table_name FROM information_schema.tables").fetchall()
    present = {name for (name,) in tables}
    if "warehouse_meta" in present and read_meta(connection, "sql_digest") == sql_digest(files):
        raw = [f for f in raw if f.name not in present or "CREATE OR REPLACE VIEW" not in f.text]
    return create_relations(connection, raw)


def sql_digest(files: list[SqlFile]) -> str:
    """A digest of every SQL file's name and text, of the rows of every seeds/ table, of the code
    that fills the FILLED tables and of the comments."""
    digest = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.label):
        digest.update(f"{f.label}\0{f.text}\0".encode())
        if f.seeded:
            digest.update(f"{sorted(SEEDS[f.name]())!r}\0".encode())
        if f.name in FILLED_VERSIONS:  # new formulas: the rows computed from them are outdated
            digest.update(f"{FILLED_VERSIONS[f.name]()}\0".encode())
        if f.name in contracts_by_relation():  # a changed meaning is an outdated comment
            digest.update(f"{comment_statements(contracts_by_relation()[f.name], '')!r}\0".encode())
    return digest.hexdigest()


def missing_relations(connection: duckdb.DuckDBPyConnection) -> list[str]:
    """Relations defined by the packaged sql tree that the catalog does not hold."""
    present = {
        row[0] for row in connection.sql("SELECT table_name FROM information_schema.tables").fetchall()
    }
    return sorted(f.name for f in load_sql_files() if f.name not in present)


def views_are_current(connection: duckdb.DuckDBPyConnection) -> bool:
    """Whether every relation exists, was built from the installed SQL text and from the current data."""
    if missing_relations(connection):
        return False
    if read_meta(connection, "sql_digest") != sql_digest(load_sql_files()):
        return False
    return read_meta(connection, "inputs_stamp") == inputs_stamp(connection)


def stale_runs(connection: duckdb.DuckDBPyConnection) -> set[tuple[str, str]] | None:
    """The runs whose materialized rows are out of date, or None when everything must be rebuilt.

    Everything: a relation is missing, the SQL or what all runs share (vocabulary, kernel
    patterns) changed, or the warehouse kept no per-run stamps. Else the runs whose inputs
    changed since the tables were computed (an ingest under way registers files before it
    refreshes them).
    """
    before = _stored_run_stamps(connection)
    if (
        before is None
        or missing_relations(connection)
        or read_meta(connection, "sql_digest") != sql_digest(load_sql_files())
        or read_meta(connection, "global_stamp") != global_stamp(connection)
    ):
        return None
    return changed_runs(run_stamps(connection), before)


def open_for_query(warehouse_dir: Path, *, isolated: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection that never writes the warehouse; out-of-date relations are recomputed in memory.

    Only the stale runs' materialized rows are recomputed when the SQL and the shared inputs are
    current (see `stale_runs`); otherwise every view and table is rebuilt in memory, which costs
    what the refresh at the end of an ingest costs over the whole warehouse, for every command.
    `isolated`: always a database of its own (in memory, the warehouse attached read-only), so
    that settings made on it, such as the query sandbox's, stay off other connections to the file
    in this process (DuckDB shares one database, and its settings, per file and process).
    """
    connection = connect(warehouse_dir, read_only=True)
    with closed_on_error(connection):
        if "warehouse_meta" not in stored_tables(connection):  # a DuckDB file tracehouse did not make
            raise WarehouseError(
                f"{warehouse_dir}: {DB_NAME} is no tracehouse warehouse (no warehouse_meta table); "
                "create one with tracehouse ingest (tracehouse.ingest in Python)"
            )
        current = views_are_current(connection)
        if current and not isolated:
            return connection
        stale = set() if current else stale_runs(connection)
    connection.close()
    return open_in_memory(warehouse_dir, runs=stale)


def open_in_memory(
    warehouse_dir: Path, *, runs: set[tuple[str, str]] | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory database over the warehouse attached read-only, with out-of-date relations recomputed.

    runs None: every view and table is rebuilt. The warehouse's own tables (traces, manifests,
    patterns, ...) are read where they are; the views, the seeds/ tables (from this version's
    definitions) and the materialized tables are created in memory from the installed SQL and
    come first in the search path, so a query sees current results and the file is never
    written (it may be on a read-only mount, or an ingest may be about to write it). The cost is
    that of a full refresh, paid by every command until an ingest stores the tables.
    runs given (the SQL is current): only these runs' materialized rows are recomputed, and
    shown in place of their stored ones (refresh.overlay_runs).
    """
    connection = duckdb.connect(":memory:", config=duckdb_config())
    with closed_on_error(connection):
        try:
            connection.execute(f"ATTACH ? AS {ATTACHED} (READ_ONLY)", [str(db_path(warehouse_dir))])
        except duckdb.Error as exc:
            raise open_error(warehouse_dir, exc, read_only=True) from exc
        _configured(connection, warehouse_dir)
        connection.execute(f"SET search_path = 'memory.main,{ATTACHED}.main'")
        if runs is not None:
            if runs:
                overlay_runs(connection, load_sql_files(), runs, source=ATTACHED)
            return connection
        stored = stored_tables(connection)
        shadow_older_tables(connection, stored)
        rebuilt = [f for f in load_sql_files() if f.materialized or f.seeded or f.name not in stored]
        create_relations(connection, rebuilt)
    return connection


def shadow_older_tables(connection: duckdb.DuckDBPyConnection, stored: set[str]) -> None:
    """Give the raw tables of a warehouse made by an older tracehouse this version's columns, as NULL.

    Such a warehouse gains the columns at its next ingest (the raw files' ALTER TABLE lines);
    until then an in-memory view of the same name adds each missing column as NULL, so the
    views built over it answer (with NULL where the older version recorded nothing).
    """
    scratch = duckdb.connect(":memory:")
    try:
        for f in load_sql_files():
            if f.layer != RAW_LAYER or f.name not in stored:
                continue
            scratch.execute(f.text)  # a raw table's file creates it alone, as in the duckdb shell
            wanted = scratch.execute(f"DESCRIBE {f.name}").fetchall()
            have = {row[0] for row in connection.execute(f"DESCRIBE {ATTACHED}.main.{f.name}").fetchall()}
            missing = [f'CAST(NULL AS {kind}) AS "{name}"' for name, kind, *_ in wanted if name not in have]
            if missing:
                columns = ", ".join(missing)
                connection.execute(
                    f"CREATE VIEW memory.main.{f.name} AS SELECT *, {columns} FROM {ATTACHED}.main.{f.name}"
                )
    finally:
        scratch.close()


def stored_tables(connection: duckdb.DuckDBPyConnection) -> set[str]:
    """Names of the attached warehouse's base tables."""
    rows = connection.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main'",
        [ATTACHED],
    ).fetchall()
    return {name for (name,) in rows}
