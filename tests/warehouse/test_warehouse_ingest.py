"""Ingest into a warehouse: keys inside Parquet, idempotency, ranks, manifests, power logs, orphans."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import polars as pl
import pytest
from support.testdata import shared_path
from support.wh_helpers import BASE_NS, checksums, count, write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.manifest import PowerCapture, RunManifest
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.pipeline.ingest.tasks import hash_file, load_trace
from tracehouse.pipeline.parsers.kineto.parse import parse_trace
from tracehouse.pipeline.warehouse.database import connect


def two_ranks(folder: Path) -> list[Path]:
    return [write_trace(folder / "r0.json", rank=0), write_trace(folder / "r1.json.gz", rank=1, n_kernels=5)]


def test_two_ranks_land_with_keys_inside_every_parquet_file(tmp_path):
    traces = two_ranks(tmp_path / "run_a")
    summary = ingest([tmp_path / "run_a"], tmp_path / "wh")
    # 1 ProfilerStep + n launches + n kernels per rank: 7 and 11 events.
    assert (summary.loaded, summary.skipped, summary.failed, summary.events) == (2, 0, [], 18)
    wh = tmp_path / "wh"
    assert count(wh, "events") == 18 and count(wh, "steps") == 2
    files = sorted((wh / "parquet" / "events").rglob("*.parquet"))
    real = [p for p in files if p.name != "_empty.parquet"]
    assert len(real) == 2
    frame = pl.read_parquet(real[0], hive_partitioning=False)
    assert frame.columns[:4] == ["study", "run_id", "rank", "content_hash"]
    assert frame["study"].unique().to_list() == ["default"] and frame["run_id"].unique().to_list() == [
        "run_a"
    ]
    assert frame["content_hash"].unique().to_list() == [hash_file(traces[0])[1]]
    assert "study=default/run_id=run_a/rank=0" in real[0].as_posix()
    with connect(wh) as c:
        rows = c.sql(
            "SELECT rank, rank_source, n_events, n_steps, first_ts_unix_ns, last_ts_unix_ns, world_size "
            "FROM traces ORDER BY rank"
        ).fetchall()
    # rank 0: first event at ts 0 (the step), last end = kernel 2 at 1+40+5+10 = 56 µs (step ends at 160).
    assert rows[0] == (0, "distributedInfo", 7, 1, BASE_NS, BASE_NS + 160_000, 2)
    assert rows[1][:4] == (1, "distributedInfo", 11, 1)


def test_every_partition_is_lz4_compressed(tmp_path):
    """docs/warehouse.md says partitions are LZ4: every column chunk of every table's file is."""
    import pyarrow.parquet as pq

    two_ranks(tmp_path / "run_a")
    ingest([tmp_path / "run_a"], tmp_path / "wh")
    written = [p for p in (tmp_path / "wh" / "parquet").rglob("*.parquet") if p.name != "_empty.parquet"]
    assert {p.parent.parent.parent.parent.name for p in written} >= {"events", "steps"}
    codecs = set()
    for path in written:
        meta = pq.read_metadata(path)
        for g in range(meta.num_row_groups):
            codecs |= {meta.row_group(g).column(c).compression for c in range(meta.num_columns)}
    assert codecs == {"LZ4"}


def test_text_is_stored_as_dictionaries_and_read_as_varchar(tmp_path):
    """Partitions hold text as dictionary columns written from Categorical ones (parquet._stored):
    pyarrow sees dictionaries, DuckDB VARCHAR with the parser's values."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    traces = two_ranks(tmp_path / "run_a")
    ingest([tmp_path / "run_a"], tmp_path / "wh")
    wh = tmp_path / "wh"
    partition = next(p for p in (wh / "parquet" / "events").rglob("*.parquet") if p.name != "_empty.parquet")
    text = ("study", "run_id", "content_hash", "kind", "cat", "name", "pid", "tid")
    stored = pq.read_schema(partition)
    assert all(pa.types.is_dictionary(stored.field(name).type) for name in text)
    with connect(wh, read_only=True) as c:
        types = dict(c.sql("SELECT column_name, column_type FROM (DESCRIBE events)").fetchall())
        assert {types[name] for name in text} == {"VARCHAR"}
        names = c.sql("SELECT name FROM events WHERE rank = 0 ORDER BY ts_unix_ns, name").fetchall()
    parsed = parse_trace(traces[0]).events.sort("ts_unix_ns", "name")["name"].to_list()
    assert [name for (name,) in names] == parsed


def test_ingesting_twice_changes_nothing(tmp_path):
    two_ranks(tmp_path / "run_a")
    ingest([tmp_path / "run_a"], tmp_path / "wh")
    before = checksums(tmp_path / "wh")
    again = ingest([tmp_path / "run_a"], tmp_path / "wh")
    assert (again.loaded, again.skipped, again.failed) == (0, 2, [])
    assert checksums(tmp_path / "wh") == before


def test_same_content_twice_in_one_batch_is_loaded_once(tmp_path):
    write_trace(tmp_path / "a" / "r0.json", rank=0)
    write_trace(tmp_path / "b" / "r0.json", rank=0)
    summary = ingest([tmp_path / "a", tmp_path / "b"], tmp_path / "wh", study="s", run="one")
    assert (summary.loaded, summary.skipped, summary.failed) == (1, 1, [])
    assert count(tmp_path / "wh", "events") == 7


def partition_files(wh: Path) -> set[Path]:
    """The warehouse's data partitions, relative to its parquet folder (the empty placeholders left out)."""
    parquet = wh / "parquet"
    return {p.relative_to(parquet) for p in parquet.rglob("*.parquet") if p.name != "_empty.parquet"}


def test_duplicate_ranks_fail_both_naming_each_other(tmp_path, capsys):
    write_trace(tmp_path / "run" / "a.json", rank=0)
    write_trace(tmp_path / "run" / "b.json", rank=0, n_kernels=4)
    write_trace(tmp_path / "run" / "c.json", rank=1)
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(tmp_path / "wh"), "--run", "run"]) == 1
    err = capsys.readouterr().err
    a, b = str(tmp_path / "run" / "a.json"), str(tmp_path / "run" / "b.json")
    assert f"error: {a}: rank 0 of run default/run is also claimed by {b}" in err
    assert f"error: {b}: rank 0 of run default/run is also claimed by {a}" in err
    assert count(tmp_path / "wh", "traces") == 1 and count(tmp_path / "wh", "events") == 7
    assert count(tmp_path / "wh", "ingest_errors") == 2
    # the partitions on disk are exactly those that c.json alone writes: nothing of a or b is left
    write_trace(tmp_path / "alone" / "c.json", rank=1)
    alone = ["ingest", str(tmp_path / "alone"), "--warehouse", str(tmp_path / "wh_c"), "--run", "run"]
    assert main(alone) == 0
    stored = partition_files(tmp_path / "wh")
    assert stored == partition_files(tmp_path / "wh_c")
    assert {p.name for p in stored} == {hash_file(tmp_path / "run" / "c.json")[1] + ".parquet"}


def test_a_new_file_for_a_rank_already_in_the_warehouse_fails(tmp_path):
    write_trace(tmp_path / "run" / "a.json", rank=0)
    ingest([tmp_path / "run"], tmp_path / "wh")
    before = checksums(tmp_path / "wh")["events"]
    write_trace(tmp_path / "run2" / "b.json", rank=0, n_kernels=2)
    summary = ingest([tmp_path / "run2"], tmp_path / "wh", run="run")
    assert summary.failed == [
        (
            str(tmp_path / "run2" / "b.json"),
            f"rank 0 of run default/run is also claimed by {tmp_path / 'run' / 'a.json'}",
        )
    ]
    assert checksums(tmp_path / "wh")["events"] == before


def test_rank_is_never_guessed(tmp_path, capsys):
    # two traces without distributedInfo stated to be one run: which is which only the user knows
    write_trace(tmp_path / "run" / "x.json", rank=None)
    write_trace(tmp_path / "run" / "y.json", rank=None, n_kernels=2)
    args = ["ingest", str(tmp_path / "run"), "--warehouse", str(tmp_path / "wh"), "--run", "run"]
    assert main(args) == 1
    assert "x.json: no rank: the trace has no distributedInfo.rank" in capsys.readouterr().err
    assert main([*args, "--rank", "x.json=3", "--rank", "y.json=1"]) == 0
    with connect(tmp_path / "wh") as c:
        assert c.sql("SELECT rank, rank_source FROM traces ORDER BY rank").fetchall() == [
            (1, "option"),
            (3, "option"),
        ]
        # the file now loaded: its earlier error is gone
        assert c.sql("SELECT count(*) FROM ingest_errors").fetchall() == [(0,)]


def test_unknown_rank_option_is_an_error(tmp_path, capsys):
    write_trace(tmp_path / "run" / "x.json", rank=0)
    code = main(
        ["ingest", str(tmp_path / "run"), "--warehouse", str(tmp_path / "wh"), "--rank", "nope.json=1"]
    )
    assert (
        code == 1
        and "error: nope.json: --rank (Python: ranks=) names no trace file being ingested"
        in capsys.readouterr().err
    )


def test_manifest_defines_run_ranks_and_power_logs(tmp_path):
    power = shared_path("power/nvidia-smi/wrapper_8gpu_power_log.csv")
    run = tmp_path / "sweep" / "p2"
    write_trace(run / "rank0.json", rank=None)
    write_trace(run / "rank1.json", rank=1)
    shutil.copyfile(power, run / "power.csv")  # a manifest names files in its own folder only
    RunManifest(
        study="llama",
        run_id="ddp-2",
        world_size=2,
        dp=2,
        hosts=["node7"],
        traces={"0": "rank0.json", "1": "rank1.json"},
        power=PowerCapture(source="nvidia-smi", files=["power.csv"]),
    ).write(run)
    summary = ingest([tmp_path / "sweep"], tmp_path / "wh")
    assert (summary.loaded, summary.power_files, summary.failed) == (2, 1, [])
    with connect(tmp_path / "wh") as c:
        assert c.sql("SELECT study, run_id, rank, rank_source FROM traces ORDER BY rank").fetchall() == [
            ("llama", "ddp-2", 0, "manifest"),
            ("llama", "ddp-2", 1, "manifest"),
        ]
        row = c.sql("SELECT world_size, dp, origin, traces, hosts FROM run_manifests").fetchall()
        assert row == [(2, 2, "file", json.dumps({"0": "rank0.json", "1": "rank1.json"}), '["node7"]')]
        # 43 samples in the real 8-GPU log; host comes from the manifest's single host.
        assert c.sql("SELECT count(*), min(host), max(host), min(run_id) FROM power_samples").fetchall() == [
            (43, "node7", "node7", "ddp-2")
        ]
    assert ingest([tmp_path / "sweep"], tmp_path / "wh").skipped == 3


def test_a_manifest_listing_its_traces_keeps_other_json_files_out(tmp_path):
    run = tmp_path / "p2"
    write_trace(run / "rank0.json", rank=0)
    (run / "run_spec.json").write_text('{"strategy": "ddp"}')  # written by the collector, not a trace
    RunManifest(study="s", run_id="r", traces={"0": "rank0.json"}).write(run)
    summary = ingest([run], tmp_path / "wh")
    assert (summary.loaded, summary.failed) == (1, [])
    # Named explicitly, it is read (and fails as what it is).
    summary = ingest([run / "run_spec.json"], tmp_path / "wh")
    assert [Path(path).name for path, _ in summary.failed] == ["run_spec.json"]


def test_manifest_rank_contradicting_distributed_info_fails(tmp_path):
    write_trace(tmp_path / "r" / "t.json", rank=1)
    RunManifest(study="s", run_id="r", traces={"0": "t.json"}).write(tmp_path / "r")
    summary = ingest([tmp_path / "r"], tmp_path / "wh")
    assert summary.failed == [
        (str(tmp_path / "r" / "t.json"), "manifest.json says rank 0 but distributedInfo.rank is 1")
    ]


def test_rank_option_contradicting_distributed_info_fails(tmp_path):
    write_trace(tmp_path / "r" / "t.json", rank=1)
    summary = ingest([tmp_path / "r"], tmp_path / "wh", ranks={"t.json": 0})
    assert summary.failed == [
        (str(tmp_path / "r" / "t.json"), "--rank (Python: ranks=) says rank 0 but distributedInfo.rank is 1")
    ]


def test_one_file_given_two_ranks_is_refused(tmp_path, capsys):
    write_trace(tmp_path / "r" / "t.json", rank=None)
    args = ["ingest", str(tmp_path / "r"), "--warehouse", str(tmp_path / "wh"), "--rank", "t.json=0"]
    assert main([*args, "--rank", "t.json=1"]) == 2
    assert "--rank 't.json' given twice, as 0 and 1" in capsys.readouterr().err
    assert not (tmp_path / "wh").exists()


def test_orphans_are_invisible_then_cleaned(tmp_path):
    two_ranks(tmp_path / "run_a")
    ingest([tmp_path / "run_a"], tmp_path / "wh")
    before = checksums(tmp_path / "wh")
    part = tmp_path / "wh" / "parquet" / "events" / "study=default" / "run_id=run_a" / "rank=0"
    orphan = part / ("f" * 64 + ".parquet")
    pl.read_parquet(next(p for p in part.glob("*.parquet")), hive_partitioning=False).with_columns(
        content_hash=pl.lit("f" * 64)
    ).write_parquet(orphan)
    temp = part / ".x.parquet.tmp-1"
    temp.write_bytes(b"half")
    assert checksums(tmp_path / "wh") == before  # unregistered rows are not visible
    write_trace(tmp_path / "run_b" / "r0.json", rank=0)
    mark = tmp_path / "wh" / ".ingest.clean"
    assert mark.exists()  # the first ingest ended cleanly: the next need not look for orphans...
    ingest([tmp_path / "run_b"], tmp_path / "wh")
    assert orphan.exists() and temp.exists()  # ...and does not (files placed by hand stay invisible)
    mark.unlink()  # as an interrupted ingest leaves it: it removes the mark as it starts
    write_trace(tmp_path / "run_c" / "r0.json", rank=0)
    ingest([tmp_path / "run_c"], tmp_path / "wh")
    assert not orphan.exists() and not temp.exists()
    assert mark.exists()


def test_an_ingest_that_stops_on_an_error_leaves_no_clean_mark(tmp_path, monkeypatch):
    import tracehouse.pipeline.ingest.load as load_module

    two_ranks(tmp_path / "run_a")
    ingest([tmp_path / "run_a"], tmp_path / "wh")
    mark = tmp_path / "wh" / ".ingest.clean"
    assert mark.exists()

    def failing_refresh(*args):
        raise RuntimeError("the refresh failed")

    monkeypatch.setattr(load_module, "_refresh", failing_refresh)
    write_trace(tmp_path / "run_b" / "r0.json", rank=0)
    with pytest.raises(RuntimeError, match="the refresh failed"):
        ingest([tmp_path / "run_b"], tmp_path / "wh")
    assert not mark.exists()  # so the next ingest lists the Parquet folders for orphans


def test_into_a_new_warehouse_the_tasks_start_before_the_catalog_is_made(tmp_path, monkeypatch):
    """New (no catalog, no Parquet folder) and tasks run elsewhere (threads here): nothing can be
    registered yet, so the tasks start at once; into an existing warehouse, or in-process, they
    start once the catalog is made (its orphans cleaned and its hashes read)."""
    import tracehouse.pipeline.ingest.driver as driver_module
    import tracehouse.pipeline.ingest.load as load_module
    from tracehouse.pipeline.ingest.engine import IN_PROCESS, THREADS

    seen: list[bool] = []  # whether the catalog existed as each task started
    real_create = load_module.create_warehouse

    def noting_task(job, warehouse_dir, registered):
        seen.append((Path(warehouse_dir) / "tracehouse.duckdb").exists())
        return load_trace(job, warehouse_dir, registered)

    def create_after_a_task(warehouse_dir, **options):  # so that "before" does not hang on timing
        deadline = time.monotonic() + 30
        new = not (Path(warehouse_dir) / "tracehouse.duckdb").exists()
        while new and engine[0] == THREADS and not seen and time.monotonic() < deadline:
            time.sleep(0.005)
        return real_create(warehouse_dir, **options)

    engine = (THREADS, 2)
    monkeypatch.setattr(load_module, "load_trace", noting_task)
    monkeypatch.setattr(load_module, "create_warehouse", create_after_a_task)
    monkeypatch.setattr(driver_module, "local_engine", lambda sizes: engine)
    first = ingest(two_ranks(tmp_path / "run_a"), tmp_path / "wh")
    assert (first.loaded, seen[0]) == (2, False)
    seen.clear()
    other = [write_trace(tmp_path / "run_b" / f"r{r}.json", rank=r, n_kernels=6) for r in (0, 1)]
    second = ingest(other, tmp_path / "wh")
    assert (second.loaded, seen) == (2, [True, True])
    seen.clear()
    engine = (IN_PROCESS, 1)
    third = ingest([write_trace(tmp_path / "run_c" / "r0.json", rank=0, n_kernels=6)], tmp_path / "new")
    assert (third.loaded, seen) == (1, [True])
    assert count(tmp_path / "wh", "events") == 18 + 26 and count(tmp_path / "new", "events") == 13


def test_a_new_warehouse_whose_catalog_fails_keeps_nothing_half_done(tmp_path, monkeypatch):
    """The catalog of a new warehouse fails while its tasks run: it is tried once more alone (the
    tasks stopped, their partitions deleted, as for a partition it cannot read), the ingest stops
    with that error, and the next ingest loads every file, no orphan left."""
    import tracehouse.pipeline.ingest.driver as driver_module
    import tracehouse.pipeline.ingest.load as load_module
    from tracehouse.pipeline.common.errors import WarehouseError
    from tracehouse.pipeline.ingest.engine import THREADS

    two_ranks(tmp_path / "run_a")
    (tmp_path / "wh").mkdir()
    (tmp_path / "wh" / ".ingest.clean").touch()  # left by a warehouse whose files were deleted by hand
    calls = []

    def failing_catalog(warehouse_dir, **options):
        calls.append(warehouse_dir)
        deadline = time.monotonic() + 60
        while (
            len(calls) == 1
            and not any((warehouse_dir / "parquet").rglob("*.parquet"))
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)  # the first call fails once a task has written a partition
        raise WarehouseError(f"{warehouse_dir}: cannot create the warehouse: No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(load_module, "create_warehouse", failing_catalog)
        patched.setattr(driver_module, "local_engine", lambda sizes: (THREADS, 2))  # whatever the CPUs
        with pytest.raises(WarehouseError, match="No space left"):
            ingest([tmp_path / "run_a"], tmp_path / "wh")
    wh = tmp_path / "wh"
    assert len(calls) == 2 and not (wh / ".ingest.clean").exists()  # not marked clean
    again = ingest([tmp_path / "run_a"], wh)
    assert (again.loaded, again.failed) == (2, [])
    with connect(wh, read_only=True) as c:
        registered = {row[0] for row in c.sql("SELECT path FROM parquet_files").fetchall()}
    kept = {
        p.relative_to(wh).as_posix()
        for p in (wh / "parquet").rglob("*.parquet")
        if p.name != "_empty.parquet"
    }
    assert kept == registered and count(wh, "events") == 18


def test_json_summary(tmp_path, capsys):
    two_ranks(tmp_path / "run_a")
    write_trace(tmp_path / "run_a" / "nor.json", rank=None)
    args = ["ingest", str(tmp_path / "run_a"), "--warehouse", str(tmp_path / "wh"), "--run", "run_a"]
    assert main([*args, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert {k: out[k] for k in ("loaded", "skipped", "events", "power_files")} == {
        "loaded": 2,
        "skipped": 0,
        "events": 18,
        "power_files": 0,
    }
    assert [f["path"] for f in out["failed"]] == [str(tmp_path / "run_a" / "nor.json")]
    assert out["seconds"] > 0
