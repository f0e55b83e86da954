"""op_costs holds each signature of `ops` whose name has a formula, evaluated once."""

from __future__ import annotations

import duckdb
from tracehouse.pipeline.ops import store
from tracehouse.pipeline.warehouse.sql_runner import create_relations, load_sql_files

MM = ("aten::mm", "[[256, 128], [128, 128]]", '["float", "float"]', '["", ""]')
VIEW = ("aten::view", "[[4, 64], []]", '["long int", "ScalarList"]', '["", "[-1]"]')
NO_SHAPES = ("aten::addmm", None, None, None)


def _warehouse(*calls: tuple[str, str | None, str | None, str | None]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    create_relations(con, [f for f in load_sql_files() if f.name == "op_costs"])
    con.execute(
        "CREATE TABLE ops (kind VARCHAR, name VARCHAR, input_dims VARCHAR, input_types VARCHAR, "
        "concrete_inputs VARCHAR, content_hash VARCHAR DEFAULT 'h')"
    )
    con.executemany("INSERT INTO ops VALUES ('cpu_op', ?, ?, ?, ?, 'h')", [list(c) for c in calls])
    return con


def test_each_signature_evaluated_once_and_only_names_with_a_formula() -> None:
    con = _warehouse(MM, MM, VIEW, NO_SHAPES)
    assert store.fill_op_costs(con) == 2  # mm once; addmm without shapes; view has no formula
    rows = con.execute("SELECT name, formula, flops, bytes, dtype FROM op_costs ORDER BY name").fetchall()
    assert rows == [
        ("aten::addmm", None, None, None, None),
        ("aten::mm", "mm", 2 * 256 * 128 * 128, 4 * (256 * 128 + 128 * 128 + 256 * 128), "fp32"),
    ]
    assert store.fill_op_costs(con) == 0  # nothing new
    con.execute(
        "INSERT INTO ops VALUES ('cpu_op', 'aten::mm', '[[2, 3], [3, 4]]', "
        "'[\"float\", \"float\"]', NULL, 'h')"
    )
    assert store.fill_op_costs(con) == 1


def test_rows_of_other_formulas_are_recomputed() -> None:
    con = _warehouse(MM)
    store.fill_op_costs(con)
    con.execute("UPDATE op_costs SET flops = 1, formulas_version = 'old'")
    assert store.fill_op_costs(con) == 1
    assert con.execute("SELECT flops FROM op_costs").fetchall() == [(2 * 256 * 128 * 128,)]


def test_a_warehouse_without_ops_is_left_alone() -> None:
    con = duckdb.connect()
    create_relations(con, [f for f in load_sql_files() if f.name == "op_costs"])
    assert store.fill_op_costs(con) == 0


def test_new_formulas_change_the_warehouse_sql_digest(monkeypatch) -> None:
    # a warehouse whose digest differs rebuilds every relation: op_costs is refilled (rows of
    # other formulas purged) and op_calls recomputed from it
    from tracehouse.pipeline.warehouse import database, sql_runner

    files = load_sql_files()
    before = database.sql_digest(files)
    monkeypatch.setitem(sql_runner.FILLED_VERSIONS, "op_costs", lambda: "other formulas")
    assert database.sql_digest(files) != before
