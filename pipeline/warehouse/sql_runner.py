"""Create every relation of the packaged `sql/` tree in the order its files declare.

One relation per `.sql` file, the file name is the relation name, folders are layers: raw/
(what ingest writes and the views over its Parquet), seeds/ (tables filled from a Python
definition, see SEEDS), views/staging, views/marts, materialized/ (tables computed from the
rest). Each file's header, its leading comment lines, holds exactly one line

    -- depends on: rel_a, rel_b            (or: -- depends on: nothing)

naming every relation of the tree its SQL reads. Files run in a topological order of these
declarations (ties: raw first, then by layer and name); an unknown name or a cycle is an
error when the tree is loaded. tests/warehouse/test_warehouse_sql_order.py checks, with
DuckDB's binder, that each file reads exactly the relations it declares.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

import duckdb
from tracehouse.pipeline.common.comm_vocabulary import seed_rows as comm_vocabulary_rows
from tracehouse.pipeline.common.errors import WarehouseError, one_line
from tracehouse.pipeline.common.hardware import seed_rows as device_peak_rows
from tracehouse.pipeline.ops.version import formulas_version
from tracehouse.pipeline.warehouse.view_docs import comment_statements, contracts_by_relation

SQL_PACKAGE = "tracehouse.sql"
RAW_LAYER = "raw"
SEEDS_LAYER = "seeds"
# Tables computed from the other layers (`CREATE OR REPLACE TABLE name AS ...`), rerun after
# every change of the warehouse's inputs; see warehouse.refresh_materialized.
MATERIALIZED_LAYER = "materialized"
DEPENDS_ON = "-- depends on:"
NOTHING = "nothing"

# The rows of each seeds/ table, from the one Python definition of what it holds. The runner
# rewrites the table right after its file runs, so every relation that reads it sees them.
SEEDS: dict[str, Callable[[], list[tuple[object, ...]]]] = {
    "comm_vocabulary": comm_vocabulary_rows,
    "device_peaks": device_peak_rows,
}


def _heal_op_calls(connection: duckdb.DuckDBPyConnection) -> None:
    """Compute the op_calls rows of the traces stored without them (imported here: polars loads
    only when needed)."""
    from tracehouse.pipeline.ops.store import heal_op_calls

    heal_op_calls(connection)


# Raw tables whose rows tracehouse computes in Python from the warehouse's own data: the runner
# fills each right after its file runs (its inputs are raw relations, created before it), and the
# warehouse again after every ingest, before it refreshes the materialized tables.
FILLED: dict[str, Callable[[duckdb.DuckDBPyConnection], None]] = {"op_calls_healed": _heal_op_calls}
# The version of the code that computes each FILLED table's rows: part of the warehouse's SQL
# digest, so new formulas rebuild the table and everything computed from it.
FILLED_VERSIONS: dict[str, Callable[[], str]] = {"op_calls_healed": formulas_version}

_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")
_CREATES = re.compile(r"^CREATE\s+OR\s+REPLACE\s+(?P<kind>TABLE|VIEW)\b", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class SqlFile:
    """One relation's definition: its name, its layer (folder), its SQL text and what it reads."""

    name: str
    layer: str
    text: str
    depends_on: frozenset[str]

    @property
    def materialized(self) -> bool:
        """Whether the file computes a table that must be refreshed when the data changes."""
        return self._top == MATERIALIZED_LAYER

    @property
    def seeded(self) -> bool:
        """Whether the file creates a table that the runner fills from a Python definition (SEEDS)."""
        return self._top == SEEDS_LAYER

    @property
    def label(self) -> str:
        """`layer/name.sql`, for messages."""
        return f"{self.layer}/{self.name}.sql"

    @property
    def _top(self) -> str:
        return self.layer.split("/")[0]


def declared_dependencies(text: str, label: str) -> frozenset[str]:
    """The relations the `-- depends on:` line of a file's header names; absent or malformed: an error."""
    lines = text.splitlines()
    header_end = next((i for i, line in enumerate(lines) if not line.lstrip().startswith("--")), len(lines))
    found = [line.strip() for line in lines[:header_end] if line.strip().startswith(DEPENDS_ON)]
    stray = [i + 1 for i, line in enumerate(lines[header_end:], header_end) if DEPENDS_ON in line]
    if stray:
        raise WarehouseError(f"{label}: line {stray[0]}: '{DEPENDS_ON}' belongs in the header comment")
    if len(found) != 1:
        count = "no" if not found else f"{len(found)}"
        raise WarehouseError(
            f"{label}: {count} '{DEPENDS_ON}' lines in its header; it needs exactly one, "
            f"e.g. '{DEPENDS_ON} events, traces' or '{DEPENDS_ON} {NOTHING}'"
        )
    listed = found[0][len(DEPENDS_ON) :].strip()
    if listed == NOTHING:
        return frozenset()
    names = [part.strip() for part in listed.split(",")]
    bad = [n for n in names if not _NAME.match(n) or n == NOTHING]
    if bad or not names:
        raise WarehouseError(
            f"{label}: '{found[0]}': list relation names separated by commas, or '{NOTHING}' alone"
        )
    if len(set(names)) != len(names):
        raise WarehouseError(f"{label}: '{found[0]}' names a relation twice")
    return frozenset(names)


def sql_file(name: str, layer: str, text: str) -> SqlFile:
    """A SqlFile, its dependencies read from its header."""
    label = f"{layer}/{name}.sql"
    return SqlFile(name=name, layer=layer, text=text, depends_on=declared_dependencies(text, label))


def raw_ddl(table: str) -> str:
    """The text of a raw table's file (`CREATE TABLE IF NOT EXISTS ...`), for a writer that may meet
    a warehouse made before the table existed."""
    return resources.files(SQL_PACKAGE).joinpath(f"{RAW_LAYER}/{table}.sql").read_text(encoding="utf-8")


def load_sql_files(root: Traversable | None = None) -> list[SqlFile]:
    """Every `*.sql` file under the packaged sql tree (other files beside them are ignored), checked."""
    root = root if root is not None else resources.files(SQL_PACKAGE)
    found: list[SqlFile] = []
    _collect(root, "", found)
    check_tree(found)
    return found


def _collect(folder: Traversable, layer: str, found: list[SqlFile]) -> None:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir() and not entry.name.startswith(("_", ".")):
            _collect(entry, f"{layer}/{entry.name}".strip("/"), found)
        elif entry.is_file() and entry.name.endswith(".sql"):
            found.append(sql_file(entry.name[: -len(".sql")], layer, entry.read_text(encoding="utf-8")))


def check_tree(files: Sequence[SqlFile]) -> None:
    """Each relation defined once, every declared dependency defined, no cycle, every seed table fillable."""
    seen: dict[str, SqlFile] = {}
    for f in files:
        if f.name in seen:
            raise WarehouseError(f"relation {f.name} is defined twice: {seen[f.name].label} and {f.label}")
        seen[f.name] = f
    for f in files:
        unknown = sorted(f.depends_on - seen.keys())
        if unknown:
            raise WarehouseError(
                f"{f.label}: depends on {', '.join(unknown)}, which no .sql file of the tree defines"
            )
        if f.seeded and f.name not in SEEDS:
            raise WarehouseError(f"{f.label}: a seeds/ table with no rows defined in sql_runner.SEEDS")
    dependency_order(files)


def dependency_order(files: Sequence[SqlFile]) -> list[SqlFile]:
    """Files in an order where each comes after the files it depends on; raw layer first; a cycle is an error.

    Dependencies outside `files` are taken to exist already (a subset is ordered among itself).
    """
    by_name = {f.name: f for f in files}
    waiting = {f.name: set(f.depends_on & by_name.keys()) for f in files}
    readers: dict[str, list[str]] = {name: [] for name in by_name}
    for name, deps in waiting.items():
        for dep in deps:
            readers[dep].append(name)
    ready = [_key(f) for f in files if not waiting[f.name]]
    heapq.heapify(ready)
    done: list[SqlFile] = []
    while ready:
        first = by_name[heapq.heappop(ready)[-1]]
        done.append(first)
        for reader in readers[first.name]:
            waiting[reader].discard(first.name)
            if not waiting[reader]:
                heapq.heappush(ready, _key(by_name[reader]))
    if len(done) < len(files):
        raise WarehouseError(f"SQL files depend on each other in a cycle: {_a_cycle(waiting)}")
    return done


def _key(f: SqlFile) -> tuple[bool, str, str]:
    return (f.layer != RAW_LAYER, f.layer, f.name)


def _a_cycle(waiting: dict[str, set[str]]) -> str:
    """One cycle among the files still waiting, as `a -> b -> a` (each waits on the next)."""
    path = [min(name for name, deps in waiting.items() if deps)]
    while path.count(path[-1]) < 2:
        path.append(min(waiting[path[-1]]))
    start = path.index(path[-1])
    return " -> ".join(path[start:])


def create_relations(
    connection: duckdb.DuckDBPyConnection,
    files: Sequence[SqlFile] | None = None,
    *,
    only_materialized: bool = False,
) -> list[str]:
    """Run every SQL file (or only the materialized tables) in dependency order; return their names.

    The order is decided over all files, so a table that reads another table through views is
    still refreshed after it. A seeds/ table is filled right after its file runs.
    """
    ordered = dependency_order(files if files is not None else load_sql_files())
    if only_materialized:
        ordered = [f for f in ordered if f.materialized]
    kinds = _relation_kinds(connection)
    for f in ordered:
        try:
            _drop_other_kind(connection, f, kinds)
            connection.execute(f.text)
            if f.seeded:
                fill_seed(connection, f.name)
            if f.name in FILLED:
                FILLED[f.name](connection)
            comment(connection, f)
        except duckdb.Error as exc:
            message = one_line(exc)
            raise WarehouseError(f"{f.label} failed: {message}") from exc
    return [f.name for f in ordered]


def comment(connection: duckdb.DuckDBPyConnection, f: SqlFile) -> None:
    """Give a public relation and its columns their contract's meanings as DuckDB comments.

    Run right after the file: `CREATE OR REPLACE` drops the comments a relation had.
    """
    contract = contracts_by_relation().get(f.name)
    match = _CREATES.search(f.text)
    if contract is None or match is None:
        return
    for statement in comment_statements(contract, match["kind"].upper()):
        connection.execute(statement)


def _relation_kinds(connection: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Each relation of the current schema: 'VIEW' or a table type (one catalog query for all files)."""
    rows = connection.execute(
        "SELECT table_name, table_type FROM information_schema.tables "
        "WHERE table_catalog = current_database() AND table_schema = current_schema()"
    ).fetchall()
    return dict(rows)


def _drop_other_kind(connection: duckdb.DuckDBPyConnection, f: SqlFile, kinds: dict[str, str]) -> None:
    """Drop the file's relation if the catalog holds it as the other kind (a view that became a table).

    `CREATE OR REPLACE TABLE` refuses to replace a view and vice versa, so a warehouse made by a
    version where the relation was of the other kind would not upgrade. `kinds`: the catalog
    before the first file ran (a file only replaces its own relation, with the wanted kind).
    """
    match = _CREATES.search(f.text)
    if match is None or f.name not in kinds:
        return
    held, wanted = kinds[f.name], match["kind"].upper()
    if (held == "VIEW") != (wanted == "VIEW"):
        connection.execute(f"DROP {'VIEW' if held == 'VIEW' else 'TABLE'} {f.name}")


def fill_seed(connection: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Make a seeds/ table hold exactly its defined rows; return whether it had to be rewritten."""
    rows = sorted(SEEDS[name]())
    if connection.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall() == rows:
        return False
    connection.execute(f"DELETE FROM {name}")
    if rows:
        connection.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    return True
