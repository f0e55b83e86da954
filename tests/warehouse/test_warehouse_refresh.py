"""Refreshing the warehouse's relations: an upgrade that changes a relation's kind, incremental refresh."""

from __future__ import annotations

from tracehouse.pipeline.warehouse import connect, create_views, create_warehouse


def _kind(connection, name: str) -> str:
    return connection.sql(
        f"SELECT table_type FROM information_schema.tables WHERE table_name = '{name}'"
    ).fetchall()[0][0]


def test_a_relation_that_was_a_view_in_an_older_version_becomes_a_table(tmp_path):
    warehouse = create_warehouse(tmp_path / "wh")
    with connect(warehouse) as c:
        create_views(c)
        c.execute("DROP TABLE cpu_compute_segments")
        c.execute("CREATE VIEW cpu_compute_segments AS SELECT 1 AS older")
        c.execute("UPDATE warehouse_meta SET value = 'older' WHERE key = 'sql_digest'")
        create_views(c)
        assert _kind(c, "cpu_compute_segments") == "BASE TABLE"
        assert "older" not in [r[0] for r in c.sql("DESCRIBE cpu_compute_segments").fetchall()]
