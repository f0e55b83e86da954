"""The Python API as a notebook meets it, without a kernel: view comments, `wh.views()`, the displays
of Warehouse, RunDiff and IngestSummary, offline charts, a folder held in this process, a failed open.
(tests/test_notebook.py runs the same in a real Jupyter kernel.)"""

from __future__ import annotations

import json
import shutil
from importlib.metadata import version

import altair as alt
import duckdb
import polars as pl
import pytest
import tracehouse
from support.testdata import SAMPLE_TRACES
from tracehouse.pipeline.warehouse.view_docs import column_meaning, load_contracts, meaning

pytestmark = pytest.mark.slow  # the session's sample warehouse (an ingest of 22 traces)

CONTRACTS = load_contracts()
ONE_RUN = SAMPLE_TRACES / "tiny-cpu-gloo" / "ddp-ws1"
# The warehouse's own database ('tracehouse'), then the connection's (a database in memory, where
# relations rebuilt in memory and the sandbox's attached warehouse are read): the latter wins.
COMMENTS = """
SELECT name, comment FROM (
    SELECT view_name AS name, comment, database_name FROM duckdb_views()
    UNION ALL SELECT table_name, comment, database_name FROM duckdb_tables()
) WHERE database_name IN (current_database(), 'tracehouse') ORDER BY database_name = current_database()
"""


def comments(con: duckdb.DuckDBPyConnection) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """Each relation's comment, and each column's, of the connection's database."""
    relations = dict(con.sql(COMMENTS).fetchall())
    columns = con.sql(
        "SELECT table_name, column_name, comment FROM duckdb_columns() WHERE comment IS NOT NULL "
        "AND database_name IN (current_database(), 'tracehouse') ORDER BY database_name = current_database()"
    ).fetchall()
    return relations, {(t, c): text for t, c, text in columns}


def expected_comments() -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    relations = {c.relation: meaning(c) for c in CONTRACTS}
    columns = {(c.relation, col.name): column_meaning(col) for c in CONTRACTS for col in c.columns}
    return relations, columns


def test_a_plain_duckdb_client_shows_every_public_view_and_column_meaning(sample_warehouse):
    with duckdb.connect(str(sample_warehouse / "tracehouse.duckdb"), read_only=True) as con:
        relations, columns = comments(con)
    want_relations, want_columns = expected_comments()
    assert {name: relations[name] for name in want_relations} == want_relations
    assert {key: columns[key] for key in want_columns} == want_columns
    assert relations["step_breakdown"] == (
        "Where each step's time goes on each rank: GPU rule on traces with device events, CPU rule on "
        "CPU-only traces."
    )
    assert columns[("step_breakdown", "compute_us")].endswith("(µs)")
    internal = [n for n, text in relations.items() if text is not None and n not in want_relations]
    assert internal == []  # only the public views carry a meaning


def test_views_lists_the_public_views_with_the_comment_text(sample_warehouse):
    with tracehouse.open(sample_warehouse) as wh:
        views = wh.views()
        stored, _ = comments(wh.connection)
    assert views.columns == ["name", "meaning", "grain", "columns"]
    assert views["name"].to_list() == [c.relation for c in CONTRACTS]
    assert dict(zip(views["name"], views["meaning"], strict=True)) == {n: stored[n] for n in views["name"]}
    row = views.filter(views["name"] == "runs").row(0, named=True)
    assert row["grain"] == "one row per (study, run_id)" and row["columns"][:2] == ["study", "run_id"]
    # every view shows, in a notebook and a terminal, not Polars' first and last five rows
    assert len(views) > 10
    assert all(f"<td>&quot;{name}&quot;</td>" in views._repr_html_() for name in views["name"])
    assert all(f"│ {name[:20]}" in repr(views) for name in views["name"])  # long names wrap
    assert isinstance(views, pl.DataFrame)


def test_an_outdated_warehouse_read_in_memory_has_the_comments_too(sample_warehouse, tmp_path):
    copy = shutil.copytree(sample_warehouse, tmp_path / "wh")
    with duckdb.connect(str(copy / "tracehouse.duckdb")) as con:  # every run's tables become outdated
        con.execute("INSERT INTO comm_kernel_patterns VALUES ('myAllReduceKernel%', 'a user pattern')")
    with tracehouse.open(copy) as wh:
        assert wh.connection.sql("SELECT current_database()").fetchall() == [("memory",)]  # rebuilt
        relations, columns = comments(wh.connection)
    want_relations, want_columns = expected_comments()
    assert {name: relations[name] for name in want_relations} == want_relations
    assert {key: columns[key] for key in want_columns} == want_columns


def test_a_run_recomputed_in_memory_keeps_the_comments(sample_warehouse, tmp_path):
    """A run whose inputs changed after the refresh (an ingest under way) is recomputed in memory, its
    materialized tables shadowed by temporary views: those carry the meaning too."""
    copy = shutil.copytree(sample_warehouse, tmp_path / "wh")
    with duckdb.connect(str(copy / "tracehouse.duckdb")) as con:
        con.execute(
            "UPDATE run_manifests SET ingested_at = ingested_at + INTERVAL 1 SECOND WHERE run_id = 'ddp-ws4'"
        )
    with tracehouse.open(copy) as wh:
        shown = wh.connection.sql(
            "SELECT database_name, view_name, comment FROM duckdb_views() WHERE view_name = 'power_samples'"
        ).fetchall()
    (power,) = [c for c in CONTRACTS if c.relation == "power_samples"]
    assert shown == [("temp", "power_samples", meaning(power))]


def test_the_warehouse_shows_as_a_table_and_reprs_in_one_line(sample_warehouse):
    wh = tracehouse.open(sample_warehouse)
    assert repr(wh) == f"tracehouse.Warehouse({str(sample_warehouse)!r}): 1 study, 9 runs, 22 rank traces"
    table = wh._repr_html_()
    assert table.count("<tr>") == 10 and "<td style='text-align:left'>fsdp_tp-ws4-tp2</td>" in table
    wh.close()
    assert repr(wh) == f"tracehouse.Warehouse({str(sample_warehouse)!r}) (closed)"
    assert wh._repr_html_() is None  # a notebook shows the repr


def test_a_run_diff_shows_as_tables_and_a_frame(sample_warehouse):
    with tracehouse.open(sample_warehouse) as wh:
        diff = wh.diff("ddp-ws2", "ddp-ws4", top=3)
    assert "\n" not in repr(diff)
    assert repr(diff).startswith("RunDiff(tiny-cpu-gloo/ddp-ws2 -> tiny-cpu-gloo/ddp-ws4: step ")
    assert repr(diff).endswith("us); 3 regressions, 3 improvements; .pl() has every row)")
    frame = diff.pl()
    assert frame["section"].to_list() == (
        ["components"] * 4 + ["regressions"] * 3 + ["improvements"] * 3 + ["ops"] * 3 + ["modules"] * 3
    )
    assert frame.filter(frame["section"] == "components")["change_us"].sum() == pytest.approx(
        diff.step_change_us
    )
    # one level down: the largest changes either way; the sample warehouse stores no critical path
    changes = [abs(r["change_us"]) for r in diff.ops]
    assert changes == sorted(changes, reverse=True) and {r["item"] for r in diff.ops} == {"innermost_op"}
    assert {r["kind"] for r in diff.modules} == {"forward", "backward", "optimizer"}
    assert frame["on_path_b"].is_null().all()
    assert diff.df().shape == (16, 10)
    assert diff._repr_html_().count("<table>") == 5


def test_an_ingest_summary_shows_counts_and_failures(tmp_path):
    bad = tmp_path / "run" / "broken.pt.trace.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    summary = tracehouse.ingest([bad.parent], tmp_path / "wh", study="s")
    assert repr(summary).startswith("IngestSummary(0 loaded, 0 skipped, 1 failed, 0 events, 0 power logs in ")
    assert repr(summary).endswith(f" s -> {tmp_path / 'wh'})")
    frame = summary.pl()
    assert frame.columns == ["path", "reason", "internal"] and frame["path"].to_list() == [str(bad)]
    assert frame["internal"].to_list() == [False]
    page = summary._repr_html_()
    assert "<caption style='text-align:left'>failed</caption>" in page and "broken.pt.trace.json" in page


def test_charts_render_offline_unless_the_user_chose_a_renderer(sample_warehouse):
    with tracehouse.open(sample_warehouse) as wh:
        chart = wh.charts.throughput()
    bundle = chart._repr_mimebundle_(include=None, exclude=None)
    assert set(bundle) == {"text/html", "text/plain"} and "http" not in json.dumps(bundle)
    assert bundle["text/html"].startswith("<div><svg ") and "<script" not in bundle["text/html"]
    assert isinstance(chart, alt.TopLevelMixin) and chart.to_dict()["$schema"].startswith("https://")
    with alt.renderers.enable("mimetype"):  # the user's choice wins; Altair's state is theirs
        data, _ = chart._repr_mimebundle_(include=None, exclude=None)
    assert [kind for kind in data if kind.startswith("application/vnd.vegalite")] != []
    assert alt.renderers.active == "default"


def test_a_folder_held_in_this_process_is_one_sentence_in_both_orders(sample_warehouse, tmp_path):
    wh_dir = shutil.copytree(sample_warehouse, tmp_path / "wh")
    wh = tracehouse.open(wh_dir)
    with pytest.raises(tracehouse.WarehouseError) as held:
        tracehouse.ingest([ONE_RUN], wh_dir)
    assert str(held.value) == (
        f"{wh_dir}: this Python process has the warehouse open read-only (a tracehouse.open handle, or a "
        "read-only duckdb.connect); call its close() (wh.close()) first, then ingest"
    )
    wh.close()
    assert tracehouse.ingest([ONE_RUN], wh_dir).skipped == 1
    writer = duckdb.connect(str(wh_dir / "tracehouse.duckdb"))
    with pytest.raises(tracehouse.WarehouseError, match=r"open for writing .*; wait for the ingest or close"):
        tracehouse.open(wh_dir)
    writer.close()
    with tracehouse.open(wh_dir) as wh:
        assert wh.studies() == ["tiny-cpu-gloo"]


def test_a_failed_open_leaves_no_connection_behind(tmp_path):
    folder = tmp_path / "other"
    folder.mkdir()
    duckdb.connect(str(folder / "tracehouse.duckdb")).close()  # a DuckDB file, no warehouse
    with pytest.raises(tracehouse.WarehouseError, match="is no tracehouse warehouse"):
        tracehouse.open(folder)
    assert tracehouse.ingest([ONE_RUN], folder).loaded == 1  # read-write: nothing read-only is left open
    with tracehouse.open(folder) as wh:
        assert wh.runs().pl()["run_id"].to_list() == ["ddp-ws1"]


def test_the_version_is_the_installed_distributions():
    assert tracehouse.__version__ == version("tracehouse")
