"""docs/warehouse.md documents exactly the raw tables schema.py and sql/raw define."""

from __future__ import annotations

import re

from support.warehouse_doc import DOC, INPUT_TABLES, render
from support.wh_helpers import write_trace
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.pipeline.warehouse.database import open_for_query
from tracehouse.pipeline.warehouse.sql_runner import RAW_LAYER, load_sql_files


def documented() -> dict[str, dict[str, tuple[str, str]]]:
    """Per `## relation` section of docs/warehouse.md: column -> (type, unit)."""
    tables: dict[str, dict[str, tuple[str, str]]] = {}
    for section in re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]:
        name = re.match(r"`(\w+)`", section)
        if name is None:
            continue
        assert "\nGrain: " in section, name.group(1)
        rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([^|]*) \|", section, re.M)
        tables[name.group(1)] = {col: (sql_type.strip(), unit.strip()) for col, sql_type, unit in rows}
    return tables


def test_docs_match_schema():
    assert DOC.read_text() == render(), (
        "docs/warehouse.md is stale: run .venv/bin/python tests/support/warehouse_doc.py"
    )


def test_docs_list_every_raw_column_of_an_ingested_warehouse_and_nothing_else(tmp_path):
    ingest([write_trace(tmp_path / "run" / "rank0.json", rank=0)], tmp_path / "wh")
    raw = {f.name for f in load_sql_files() if f.layer == RAW_LAYER} | INPUT_TABLES
    with open_for_query(tmp_path / "wh") as c:
        rows = c.sql("SELECT table_name, column_name, data_type FROM information_schema.columns").fetchall()
    actual: dict[str, dict[str, str]] = {}
    for table, column, sql_type in rows:
        if table in raw:
            actual.setdefault(table, {})[column] = sql_type
    docs = documented()
    assert {t: {c: ty for c, (ty, _) in cols.items()} for t, cols in docs.items()} == actual
    for table, columns in docs.items():
        for column, (_, unit) in columns.items():
            if column.endswith("_ns"):
                assert unit.startswith("ns"), (table, column)
                assert ("epoch" in unit) == (column.endswith("_unix_ns") or column == "base_time_ns")
