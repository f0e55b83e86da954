"""The raw layer: relations exist, match schema.py and survive being created again."""

from __future__ import annotations

import dataclasses

from support.wh_helpers import CONTENT_TABLES, write_trace
from tracehouse.pipeline.common.manifest import RunManifest
from tracehouse.pipeline.warehouse import schema
from tracehouse.pipeline.warehouse.database import connect, create_warehouse, open_for_query
from tracehouse.pipeline.warehouse.partitions import PARQUET_TABLES

VIEW_OF_FOLDER = {
    "collectives": "collectives_raw",
    "power_samples": "power_samples_raw",
    "op_calls": "op_calls_raw",
}


def test_fresh_warehouse_has_every_raw_relation_empty(tmp_path):
    create_warehouse(tmp_path / "wh")
    with open_for_query(tmp_path / "wh") as c:
        for name in CONTENT_TABLES:
            assert c.sql(f"SELECT count(*) FROM {name}").fetchall() == [(0,)]


def test_parquet_views_have_exactly_the_schema_columns_and_types(tmp_path):
    create_warehouse(tmp_path / "wh")
    with open_for_query(tmp_path / "wh") as c:
        for folder, columns in PARQUET_TABLES.items():
            view = VIEW_OF_FOLDER.get(folder, folder)
            described = [(r[0], r[1]) for r in c.sql(f"DESCRIBE {view}").fetchall()]
            assert [name for name, _ in described] == list(columns), view
        types = dict((r[0], r[1]) for r in c.sql("DESCRIBE events").fetchall())
        assert types["ts_unix_ns"] == "BIGINT" and types["rank"] == "INTEGER"
        assert dict((r[0], r[1]) for r in c.sql("DESCRIBE process_groups").fetchall())["ranks"] == "INTEGER[]"


def test_ingest_errors_matches_schema_and_run_manifests_holds_every_manifest_field(tmp_path):
    create_warehouse(tmp_path / "wh")
    with open_for_query(tmp_path / "wh") as c:
        errors = [r[0] for r in c.sql("DESCRIBE ingest_errors").fetchall()]
        manifests = {r[0] for r in c.sql("DESCRIBE run_manifests").fetchall()}
    assert errors == list(schema.INGEST_ERRORS)
    assert {f.name for f in dataclasses.fields(RunManifest)} <= manifests


def test_creating_twice_keeps_rows(tmp_path):
    create_warehouse(tmp_path / "wh")
    with connect(tmp_path / "wh") as c:
        c.execute("INSERT INTO ingest_errors VALUES ('x.json', NULL, 'bad', now(), false, 'error')")
    create_warehouse(tmp_path / "wh")
    with open_for_query(tmp_path / "wh") as c:
        assert c.sql("SELECT path, reason FROM ingest_errors").fetchall() == [("x.json", "bad")]


def test_a_warehouse_made_before_the_internal_and_severity_columns_gains_them(tmp_path):
    create_warehouse(tmp_path / "wh")
    with connect(tmp_path / "wh") as c:
        c.execute("DROP TABLE ingest_errors")
        c.execute(
            "CREATE TABLE ingest_errors "
            '(path VARCHAR, content_hash VARCHAR, reason VARCHAR, "at" TIMESTAMPTZ)'
        )
        c.execute("INSERT INTO ingest_errors VALUES ('x.json', NULL, 'bad', now())")
    create_warehouse(tmp_path / "wh")
    with open_for_query(tmp_path / "wh") as c:
        assert c.sql("SELECT path, internal, severity FROM ingest_errors").fetchall() == [
            ("x.json", False, "error")
        ]


def test_views_are_recreated_when_missing_on_query(tmp_path):
    create_warehouse(tmp_path / "wh")
    with connect(tmp_path / "wh") as c:
        c.execute("DROP VIEW events")
    with open_for_query(tmp_path / "wh") as c:
        assert c.sql("SELECT count(*) FROM events").fetchall() == [(0,)]


def test_a_warehouse_of_an_older_tracehouse_is_read_with_null_for_newer_columns(tmp_path):
    """Its raw tables lack columns this version added: queries see them as NULL, nothing is written."""
    wh = tmp_path / "wh"
    write_trace(wh.parent / "run" / "r0.json", rank=0)
    from tracehouse.pipeline.ingest.driver import ingest

    assert ingest([wh.parent / "run"], wh).loaded == 1
    with connect(wh) as c:  # as an older version left it: no such columns, views of older SQL
        c.execute("ALTER TABLE traces DROP COLUMN unknown_categories")
        c.execute("ALTER TABLE traces DROP COLUMN n_device_events")
        c.execute("UPDATE warehouse_meta SET value = 'older' WHERE key = 'sql_digest'")
    before = (wh / "tracehouse.duckdb").stat().st_mtime_ns
    with open_for_query(wh) as c:
        got = c.sql("SELECT rule, n_device_events, unknown_categories, reason FROM trace_coverage").fetchall()
        assert got == [("gpu", None, None, None)]
        assert c.sql("SELECT count(*) FROM step_breakdown").fetchall() == [(1,)]
    assert (wh / "tracehouse.duckdb").stat().st_mtime_ns == before
