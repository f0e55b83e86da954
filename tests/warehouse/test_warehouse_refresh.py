"""Refreshing the warehouse's relations: an upgrade that changes a relation's kind, incremental refresh."""

from __future__ import annotations

import json
from pathlib import Path

from support.testdata import sample_runs, shared_path
from support.wh_helpers import relation_contents, relation_rows, same_row
from tracehouse import ingest
from tracehouse.pipeline.warehouse.database import (
    connect,
    create_views,
    create_warehouse,
    open_for_query,
    refresh_materialized,
)
from tracehouse.pipeline.warehouse.sql_runner import load_sql_files


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


def _ingest(warehouse: Path, path: Path, **options) -> None:
    summary = ingest([path], warehouse, **options)
    assert not summary.failed, summary.failed


def _public_traces() -> dict[str, Path]:
    return {
        name: shared_path(f"traces/hta/{name}.json.gz")
        for name in ("pair_sampled_rank-0", "pair_sampled_rank-1", "mtia_trace_single_rank")
    }


def test_incremental_refresh_equals_a_full_rebuild(tmp_path):
    """Runs ingested one by one (new runs, then a rank added to a run already there) into one
    warehouse: every materialized table and view equals a full rebuild of the same warehouse."""
    public = _public_traces()
    runs = sample_runs()
    assert len(runs) >= 4
    warehouse = tmp_path / "wh"
    for run in runs:
        _ingest(warehouse, run)
    pair0, pair1, mtia = (
        public["pair_sampled_rank-0"],
        public["pair_sampled_rank-1"],
        public["mtia_trace_single_rank"],
    )
    _ingest(warehouse, pair0, study="public", run="pair", ranks={str(pair0): 0})
    _ingest(warehouse, mtia, study="public", run="mtia", ranks={str(mtia): 0})
    _ingest(warehouse, pair1, study="public", run="pair", ranks={str(pair1): 1})  # a second rank of a run
    incremental = relation_contents(warehouse)
    with connect(warehouse) as c:
        assert json.loads(c.sql("SELECT value FROM warehouse_meta WHERE key = 'run_stamps'").fetchall()[0][0])
        create_views(c, force=True)
    full = relation_contents(warehouse)
    materialized = {f.name for f in load_sql_files() if f.materialized}
    assert incremental.keys() == full.keys()
    for name in full:
        assert len(incremental[name]) == len(full[name]), name
        for a, b in zip(incremental[name], full[name], strict=True):
            assert same_row(a, b, exact=name in materialized), (name, a, b)
    assert len({rank for _, _, rank, *_ in full["step_breakdown"]}) >= 2
    assert {(s, r) for s, r, *_ in full["window_breakdown"]} >= {("public", "pair"), ("public", "mtia")}


def test_an_ingest_recomputes_only_the_runs_whose_inputs_changed(tmp_path):
    """A mark put on one run's materialized rows survives an ingest of another run (its rows were
    not recomputed) and goes when that run's inputs change, or when everything is rebuilt."""
    first, second, third = sample_runs()[:3]
    warehouse = tmp_path / "wh"
    _ingest(warehouse, first)
    with connect(warehouse) as c:
        study, run_id = c.sql("SELECT study, run_id FROM traces LIMIT 1").fetchall()[0]
        c.execute("INSERT INTO run_event_ranks VALUES (?, ?, -1)", [study, run_id])
    _ingest(warehouse, second)
    assert count_where(warehouse, "run_event_ranks", "n_ranks = -1") == 1
    with connect(warehouse) as c:  # the first run's manifest changes: its rows are recomputed
        c.execute(
            "UPDATE run_manifests SET ingested_at = now() WHERE study = ? AND run_id = ?", [study, run_id]
        )
    _ingest(warehouse, third)
    assert count_where(warehouse, "run_event_ranks", "n_ranks = -1") == 0
    with connect(warehouse) as c:
        c.execute("INSERT INTO run_event_ranks VALUES (?, ?, -1)", [study, run_id])
        c.execute(
            "INSERT INTO comm_kernel_patterns VALUES ('%never_a_kernel%', 'test')"
        )  # shared by all runs
    _ingest(warehouse, third)
    assert count_where(warehouse, "run_event_ranks", "n_ranks = -1") == 0


def test_run_event_ranks_counts_the_ranks_that_have_events(tmp_path):
    """run_event_ranks, counted from the catalog, equals the distinct ranks of the events."""
    warehouse = tmp_path / "wh"
    for run in sample_runs()[:2]:
        _ingest(warehouse, run)
    with connect(warehouse, read_only=True) as c:
        stored = c.sql("SELECT study, run_id, n_ranks FROM run_event_ranks ORDER BY ALL").fetchall()
        counted = c.sql(
            "SELECT study, run_id, count(DISTINCT rank) FROM events GROUP BY ALL ORDER BY ALL"
        ).fetchall()
    assert len(counted) == 2 and max(n for *_, n in counted) >= 2
    assert stored == counted


def test_a_refresh_commits_into_the_file_not_the_log(tmp_path):
    """The refresh's commit checkpoints (warehouse.transaction): its rows are in the DuckDB file,
    not in a write-ahead log for the close to copy again, and DuckDB's threshold is as before."""
    warehouse = tmp_path / "wh"
    _ingest(warehouse, sample_runs()[0])
    log = warehouse / "tracehouse.duckdb.wal"
    with connect(warehouse) as c:
        threshold = c.sql("SELECT current_setting('checkpoint_threshold')").fetchall()[0][0]
        c.execute("INSERT INTO comm_kernel_patterns VALUES ('%never_a_kernel%', 'test')")
        assert log.exists() and log.stat().st_size > 0  # an ordinary commit goes to the log
        assert refresh_materialized(c)  # the patterns changed: every run is recomputed
        assert not log.exists() or log.stat().st_size == 0
        assert c.sql("SELECT current_setting('checkpoint_threshold')").fetchall()[0][0] == threshold


def count_where(warehouse: Path, table: str, condition: str) -> int:
    with connect(warehouse, read_only=True) as c:
        return c.sql(f"SELECT count(*) FROM {table} WHERE {condition}").fetchall()[0][0]


def test_every_materialized_table_keeps_its_rows_per_run(tmp_path):
    """The per-run refresh deletes and inserts by (study, run_id): every materialized table has them."""
    warehouse = create_warehouse(tmp_path / "wh")
    with connect(warehouse) as c:
        create_views(c)
        for f in load_sql_files():
            if f.materialized:
                columns = {row[0] for row in c.sql(f"DESCRIBE {f.name}").fetchall()}
                assert {"study", "run_id"} <= columns, f.label


def test_a_query_recomputes_only_the_stale_runs_in_memory(tmp_path):
    """A run registered but not yet refreshed (an ingest under way) is recomputed in memory by a
    query, the other runs' stored rows are used as they are, and the warehouse is not written."""
    first, second = sample_runs()[:2]
    warehouse = tmp_path / "wh"
    _ingest(warehouse, first)
    _ingest(warehouse, second)
    expected = relation_contents(warehouse)
    materialized = [f.name for f in load_sql_files() if f.materialized]
    with connect(warehouse) as c:
        (study, run_id), (other_study, other_run) = c.sql(
            "SELECT DISTINCT study, run_id FROM traces ORDER BY ingested_at DESC"
        ).fetchall()[:2]
        stamps = json.loads(
            c.sql("SELECT value FROM warehouse_meta WHERE key = 'run_stamps'").fetchall()[0][0]
        )
        kept = [row for row in stamps if row[:2] != [study, run_id]]
        assert len(kept) == len(stamps) - 1
        c.execute("UPDATE warehouse_meta SET value = ? WHERE key = 'run_stamps'", [json.dumps(kept)])
        c.execute("UPDATE warehouse_meta SET value = 'stale' WHERE key = 'inputs_stamp'")
        for name in materialized:
            c.execute(f"DELETE FROM {name} WHERE study = ? AND run_id = ?", [study, run_id])
        # a mark no view reads: it stays if the other run's rows are not recomputed
        c.execute("INSERT INTO cpu_call_reach VALUES (?, ?, -1, 0, 1, 0, NULL)", [other_study, other_run])
    before = (warehouse / "tracehouse.duckdb").read_bytes()
    with open_for_query(warehouse) as c:
        assert c.sql("SELECT study, run_id FROM cpu_call_reach WHERE rank_key = -1").fetchall() == [
            (other_study, other_run)
        ]
        got = relation_rows(c)
    assert (warehouse / "tracehouse.duckdb").read_bytes() == before
    for name in expected:
        rows = [r for r in got[name] if not (name == "cpu_call_reach" and r[2] == -1)]
        assert len(rows) == len(expected[name]), name
        for a, b in zip(rows, expected[name], strict=True):
            assert same_row(a, b, exact=name in materialized), (name, a, b)


def test_a_refresh_reads_the_warehouse_partitions_not_the_current_directory(tmp_path, monkeypatch):
    """The runs' partitions are listed by path for a refresh; a file of the same relative path in
    the current directory (here: a copy of another warehouse's, fewer events) is not read."""
    import polars as pl
    from support.wh_helpers import write_trace

    rank0 = write_trace(tmp_path / "run" / "r0.json", rank=0, world_size=2, n_kernels=6)
    rank1 = write_trace(tmp_path / "later" / "r1.json", rank=1, world_size=2, n_kernels=3)
    clean, wh, decoy = tmp_path / "clean", tmp_path / "wh", tmp_path / "decoy"
    for warehouse in (clean, wh):
        _ingest(warehouse, rank0, run="run")
    for partition in (wh / "parquet").rglob("*.parquet"):  # the same paths, one event less each
        copy = decoy / partition.relative_to(wh)
        copy.parent.mkdir(parents=True, exist_ok=True)
        frame = pl.read_parquet(partition, hive_partitioning=False)
        frame.head(max(frame.height - 1, 0)).write_parquet(copy)
    _ingest(clean, rank1, run="run")
    monkeypatch.chdir(decoy)
    _ingest(wh, rank1, run="run")  # the run is refreshed: both ranks' partitions are read again
    materialized = sorted(f.name for f in load_sql_files() if f.materialized)
    for name in materialized:
        with connect(wh, read_only=True) as a, connect(clean, read_only=True) as b:
            ours, expected = (c.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for c in (a, b))
        assert ours == expected, name
    assert _count(wh, "gpu_events") > 0


def _count(warehouse: Path, table: str) -> int:
    with connect(warehouse, read_only=True) as c:
        return c.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0]
