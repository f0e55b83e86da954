"""Create every relation of the packaged `sql/` tree, raw layer first, in dependency order.

One relation per `.sql` file, the file name is the relation name, folders are layers. A file
depends on another when its text (comments and string literals removed) names the other's
relation as a whole word; files run in a topological order of that graph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError, one_line

SQL_PACKAGE = "tracehouse.sql"
RAW_LAYER = "raw"
# Tables computed from the other layers (`CREATE OR REPLACE TABLE name AS ...`), rerun after
# every change of the warehouse's inputs; see warehouse.refresh_materialized.
MATERIALIZED_LAYER = "materialized"

# Comments and string literals never name a dependency ('parquet/collectives/...' is a path).
_NOT_CODE = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class SqlFile:
    """One relation's definition: its name, its layer (folder) and its SQL text."""

    name: str
    layer: str
    text: str

    @property
    def materialized(self) -> bool:
        """Whether the file computes a table that must be refreshed when the data changes."""
        return self.layer.split("/")[0] == MATERIALIZED_LAYER

    @property
    def label(self) -> str:
        """`layer/name.sql`, for messages."""
        return f"{self.layer}/{self.name}.sql"


def load_sql_files(root: Traversable | None = None) -> list[SqlFile]:
    """Every `*.sql` file under the packaged sql tree (other files beside them are ignored)."""
    root = root if root is not None else resources.files(SQL_PACKAGE)
    found: list[SqlFile] = []
    _collect(root, "", found)
    _check_unique(found)
    return found


def _collect(folder: Traversable, layer: str, found: list[SqlFile]) -> None:
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.is_dir() and not entry.name.startswith(("_", ".")):
            _collect(entry, f"{layer}/{entry.name}".strip("/"), found)
        elif entry.is_file() and entry.name.endswith(".sql"):
            name = entry.name[: -len(".sql")]
            found.append(SqlFile(name=name, layer=layer, text=entry.read_text(encoding="utf-8")))


def _check_unique(files: list[SqlFile]) -> None:
    seen: dict[str, SqlFile] = {}
    for f in files:
        if f.name in seen:
            raise WarehouseError(f"relation {f.name} is defined twice: {seen[f.name].label} and {f.label}")
        seen[f.name] = f


def dependencies(file: SqlFile, names: set[str]) -> set[str]:
    """The other relations whose names appear as whole words in the file's code."""
    code = _NOT_CODE.sub(" ", file.text).lower()
    words = set(re.findall(r"[a-z_][a-z0-9_]*", code))
    return (words & names) - {file.name}


def dependency_order(files: list[SqlFile]) -> list[SqlFile]:
    """Files in an order where each comes after what it reads; raw layer first; a cycle is an error."""
    by_name = {f.name: f for f in files}
    deps = {f.name: dependencies(f, set(by_name)) for f in files}
    done: list[SqlFile] = []
    placed: set[str] = set()
    while len(done) < len(files):
        ready = [f for f in files if f.name not in placed and deps[f.name] <= placed]
        if not ready:
            stuck = sorted(n for n in by_name if n not in placed)
            raise WarehouseError(f"SQL files depend on each other in a cycle: {', '.join(stuck)}")
        first = min(ready, key=lambda f: (f.layer != RAW_LAYER, f.layer, f.name))
        done.append(first)
        placed.add(first.name)
    return done


def create_relations(
    connection: duckdb.DuckDBPyConnection,
    files: list[SqlFile] | None = None,
    *,
    only_materialized: bool = False,
) -> list[str]:
    """Run every SQL file (or only the materialized tables) in dependency order; return their names.

    The order is decided over all files, so a table that reads another table through views is
    still refreshed after it.
    """
    ordered = dependency_order(files if files is not None else load_sql_files())
    if only_materialized:
        ordered = [f for f in ordered if f.materialized]
    for f in ordered:
        try:
            connection.execute(f.text)
        except duckdb.Error as exc:
            message = one_line(exc)
            raise WarehouseError(f"{f.label} failed: {message}") from exc
    return [f.name for f in ordered]
