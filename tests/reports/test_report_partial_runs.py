"""A partial run (traces of fewer ranks than its world size): named in the headline and in Provenance."""

from __future__ import annotations

import shutil

import duckdb
from support.testdata import SAMPLE_TRACES
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.reports.headline import headline
from tracehouse.reports.provenance import provenance_tables
from tracehouse.reports.source import open_warehouse


def test_a_partial_run_is_named_in_the_headline_and_provenance(tmp_path):
    whole, part = tmp_path / "ddp2", tmp_path / "half"
    part.mkdir()
    shutil.copytree(
        SAMPLE_TRACES / "tiny-cpu-gloo" / "ddp-ws2", whole, ignore=shutil.ignore_patterns("manifest.json")
    )
    shutil.copy(SAMPLE_TRACES / "tiny-cpu-gloo" / "ddp-ws4" / "rank1.pt.trace.json.gz", part)
    summary = ingest([whole, part], tmp_path / "wh", study="s")
    assert summary.failed == [] and sorted(summary.runs) == ["s/ddp2", "s/half"]
    con: duckdb.DuckDBPyConnection = open_warehouse(tmp_path / "wh")
    try:
        facts = {fact.label: fact.text for fact in headline(con, "s")}
        assert facts["Partial runs"].startswith(
            "half (1 of 4 ranks): the other ranks' traces are not in the warehouse"
        )
        [table] = [t for t in provenance_tables(con, "s") if t.title.startswith("Partial runs")]
        note = "partial run: traces of 1 of its 4 ranks; its step times and breakdowns cover those ranks only"
        assert [list(row) for row in table.rows] == [["half", "4", "[1]", note]]
    finally:
        con.close()
