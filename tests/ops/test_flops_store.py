"""op_calls of a trace costed by other formulas: its rows are computed again from the stored frames
(op_calls_healed) and shown instead of the stale partition's; healed rows follow the traces."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest
from support.testdata import sample_runs
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.pipeline.ingest.forget import forget_run
from tracehouse.pipeline.ops import store
from tracehouse.pipeline.warehouse import sql_runner
from tracehouse.pipeline.warehouse.database import connect, create_views


def _rows(warehouse: Path, sql: str) -> list[tuple]:
    with connect(warehouse, read_only=True) as c:
        return c.sql(sql).fetchall()


def _op_calls(warehouse: Path) -> pl.DataFrame:
    with connect(warehouse, read_only=True) as c:
        frame = c.sql("SELECT * EXCLUDE (formulas_version) FROM op_calls_raw").pl()
    return frame.sort(frame.columns, nulls_last=True)


@pytest.mark.slow
def test_new_formulas_recompute_every_trace_and_the_stale_partitions_stay_hidden(tmp_path, monkeypatch):
    warehouse = tmp_path / "wh"
    assert not ingest(sample_runs()[:1], warehouse).failed
    assert _rows(warehouse, "SELECT count(*) FROM op_calls_healed") == [(0,)]  # the tasks wrote them all
    before = _op_calls(warehouse)
    traces = _rows(warehouse, "SELECT count(*) FROM traces")[0][0]

    monkeypatch.setattr(store, "formulas_version", lambda: "other formulas")
    monkeypatch.setitem(sql_runner.FILLED_VERSIONS, "op_calls_healed", lambda: "other formulas")
    with connect(warehouse) as c:  # the SQL digest moved: every relation is rebuilt, op_calls healed
        create_views(c)
    assert _rows(
        warehouse, "SELECT count(DISTINCT content_hash), min(formulas_version) FROM op_calls_healed"
    ) == [(traces, "other formulas")]
    after = _op_calls(warehouse)
    assert after.height == before.height  # the partitions' rows are not shown beside the healed ones
    assert after.equals(before)  # the same formulas in fact: the same numbers
    with connect(warehouse) as c:
        assert store.heal_op_calls(c) == 0  # checked once per formulas version


@pytest.mark.slow
def test_forgetting_a_run_drops_its_healed_rows(tmp_path):
    warehouse = tmp_path / "wh"
    first, second = sample_runs()[:2]
    assert not ingest([first, second], warehouse).failed
    with duckdb.connect(str(warehouse / "tracehouse.duckdb")) as c:
        c.execute("DELETE FROM parquet_files WHERE table_name = 'op_calls'")  # as an older tracehouse
    with connect(warehouse) as c:
        assert store.heal_op_calls(c) > 0
    runs = _rows(warehouse, "SELECT DISTINCT study, run_id FROM op_calls_healed ORDER BY ALL")
    assert len(runs) == 2
    forget_run(warehouse, runs[0][1], study=runs[0][0])
    assert _rows(warehouse, "SELECT DISTINCT study, run_id FROM op_calls_healed") == [runs[1]]
    assert _rows(warehouse, "SELECT DISTINCT study, run_id FROM op_calls") == [runs[1]]
