"""The SQL tree's creation order is the one its `-- depends on:` headers declare, and they are right.

DuckDB's binder decides what a file reads: a relation's dependencies are created in a schema
`deps` (views there resolve their own names in `deps`), and only some of them are made visible
in `main`, as views over `deps`, before the file runs in `main`. A file creates when its
declared dependencies alone are visible (none is missing) and fails, naming it, when any one
of them is hidden (none is unused).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from support.wh_helpers import CONTENT_TABLES
from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.pipeline.warehouse.database import connect, create_views, create_warehouse
from tracehouse.pipeline.warehouse.partitions import write_empty_partitions
from tracehouse.pipeline.warehouse.sql_runner import (
    SEEDS,
    SqlFile,
    create_relations,
    dependency_order,
    load_sql_files,
    sql_file,
)

FILES = load_sql_files()
BY_NAME = {f.name: f for f in FILES}
DECLARED = [(f.name, dep) for f in FILES for dep in sorted(f.depends_on)]


def closure(name: str, by_name: dict[str, SqlFile]) -> set[str]:
    """Every relation a file reads, directly or through others."""
    seen: set[str] = set()
    todo = list(by_name[name].depends_on)
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(by_name[dep].depends_on)
    return seen


@pytest.fixture(scope="module")
def parquet_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("partitions")
    write_empty_partitions(root)
    return root


@pytest.fixture
def isolated(parquet_root: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    connection.execute("SET file_search_path = ?", [str(parquet_root)])
    # A name missing from the catalog must fail, not be read from a Python variable of that name.
    connection.execute("SET python_enable_replacements = false")
    yield connection
    connection.close()


def create_seeing(
    connection: duckdb.DuckDBPyConnection, name: str, visible: set[str], by_name: dict[str, SqlFile] = BY_NAME
) -> None:
    """Create the relation `name` in main where only `visible` of its dependencies can be named."""
    connection.execute("CREATE SCHEMA deps")
    connection.execute("USE memory.deps")
    create_relations(connection, [by_name[n] for n in closure(name, by_name)])
    connection.execute("USE memory.main")
    for dep in visible:
        connection.execute(f"CREATE VIEW main.{dep} AS SELECT * FROM deps.{dep}")
    create_relations(connection, [by_name[name]])


def test_every_relation_builds_on_an_empty_warehouse_in_the_declared_order(tmp_path):
    create_warehouse(tmp_path / "wh")
    with connect(tmp_path / "wh") as c:
        built = create_views(c, force=True)
        present = {r[0] for r in c.sql("SELECT table_name FROM information_schema.tables").fetchall()}
    assert sorted(built) == sorted(BY_NAME)
    assert present >= set(BY_NAME)
    place = {name: i for i, name in enumerate(built)}
    for name, dep in DECLARED:
        assert place[dep] < place[name], f"{name} was built before {dep}, which it declares"


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_a_file_creates_where_only_its_declared_dependencies_exist(isolated, name):
    create_seeing(isolated, name, set(BY_NAME[name].depends_on))


@pytest.mark.parametrize(("name", "hidden"), DECLARED, ids=[f"{n}-{d}" for n, d in DECLARED])
def test_a_file_fails_without_any_one_declared_dependency(isolated, name, hidden):
    with pytest.raises(WarehouseError, match=rf"\b{hidden}\b.*does not exist|does not exist.*\b{hidden}\b"):
        create_seeing(isolated, name, set(BY_NAME[name].depends_on) - {hidden})


def test_the_binder_check_sees_a_read_the_header_does_not_declare(isolated):
    # Reading run_manifests through the view runs (declared) is fine; naming it directly is not.
    text = "-- depends on: runs\nCREATE VIEW v AS SELECT * FROM runs JOIN run_manifests USING (run_id);"
    by_name = {**BY_NAME, "v": sql_file("v", "views/marts", text)}
    with pytest.raises(WarehouseError, match=r"run_manifests.*does not exist"):
        create_seeing(isolated, "v", {"runs"}, by_name)


def test_a_relation_read_only_through_another_is_seen_as_unused(isolated):
    text = "-- depends on: runs, traces\nCREATE VIEW v AS SELECT * FROM runs;"
    by_name = {**BY_NAME, "v": sql_file("v", "views/marts", text)}
    create_seeing(isolated, "v", {"runs"}, by_name)  # hiding traces changes nothing: it is unused


def test_every_packaged_file_declares_and_every_seed_has_its_file():
    assert {f.name for f in FILES if f.seeded} == set(SEEDS)
    assert not any(f.name.endswith(".contract") for f in FILES)
    raw = [f.name for f in FILES if f.layer == "raw"]
    assert set(raw) >= set(CONTENT_TABLES)
    names = [f.name for f in dependency_order(FILES)]
    assert set(names[: len(raw)]) == set(raw)


def f(name: str, deps: str, layer: str = "views") -> SqlFile:
    return sql_file(name, layer, f"-- {name}\n-- depends on: {deps}\nSELECT 1;")


def test_order_puts_dependencies_first_and_raw_layer_first():
    files = [
        f("z_view", "a_view"),
        f("a_view", "t2"),
        f("t2", "nothing", "raw"),
        f("t1", "nothing", "raw"),
        f("b_view", "nothing"),
    ]
    assert [x.name for x in dependency_order(files)] == ["t1", "t2", "a_view", "b_view", "z_view"]


def test_a_subset_is_ordered_among_itself():
    files = [f("z_view", "a_view, t1"), f("a_view", "t1")]
    assert [x.name for x in dependency_order(files)] == ["a_view", "z_view"]


def test_a_cycle_is_a_clear_error_naming_it():
    with pytest.raises(WarehouseError, match=r"cycle: a -> b -> a"):
        dependency_order([f("a", "b"), f("b", "a"), f("c", "a"), f("d", "nothing")])
    with pytest.raises(WarehouseError, match=r"cycle: s -> s"):
        dependency_order([f("s", "s")])


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_an_unknown_dependency_is_a_clear_error(tmp_path):
    root = write_tree(
        tmp_path, {"raw/t.sql": "-- depends on: nothing\n", "views/v.sql": "-- depends on: t, tt\n"}
    )
    with pytest.raises(WarehouseError, match=r"views/v\.sql: depends on tt, which no \.sql file"):
        load_sql_files(root)


def test_a_loaded_tree_with_a_cycle_fails_to_load(tmp_path):
    root = write_tree(tmp_path, {"views/a.sql": "-- depends on: b\n", "views/b.sql": "-- depends on: a\n"})
    with pytest.raises(WarehouseError, match="cycle: a -> b -> a"):
        load_sql_files(root)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CREATE VIEW v AS SELECT 1;\n", "no '-- depends on:' lines"),
        ("-- about v\nCREATE VIEW v AS SELECT 1;\n-- depends on: t\n", "line 3: .* belongs in the header"),
        ("-- depends on: t\n-- depends on: t\n", "2 '-- depends on:' lines"),
        ("-- depends on:\n", "list relation names"),
        ("-- depends on: t,\n", "list relation names"),
        ("-- depends on: t u\n", "list relation names"),
        ("-- depends on: nothing, t\n", "list relation names"),
        ("-- depends on: t, t\n", "names a relation twice"),
    ],
)
def test_a_malformed_header_is_a_clear_error(text, message):
    with pytest.raises(WarehouseError, match=message):
        sql_file("v", "views", text)


def test_the_header_may_sit_anywhere_in_the_leading_comment():
    assert sql_file("v", "views", "-- about v\n--   more\n-- depends on: a, b_c\nSELECT 1").depends_on == {
        "a",
        "b_c",
    }
    assert sql_file("v", "views", "-- depends on: nothing\nSELECT 1").depends_on == frozenset()
