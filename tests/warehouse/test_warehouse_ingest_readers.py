"""An ingest holds the catalog read-write only in short phases: readers work while it parses."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from support.wh_helpers import checksums, count, write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.ingest.driver import ingest

N_FILES = 60


def inputs(folder: Path) -> Path:
    """Enough rank traces for an ingest of several seconds."""
    for rank in range(N_FILES):
        write_trace(folder / f"rank{rank:02d}.json", rank=rank, world_size=N_FILES, n_kernels=4000)
    return folder


def start_ingest(run: Path, wh: Path) -> subprocess.Popen:
    """`tracehouse ingest` in its own process; returns once it is parsing (its first partitions exist)."""
    command = [sys.executable, "-m", "tracehouse.pipeline.cli", "ingest", str(run), "--warehouse", str(wh)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list((wh / "parquet" / "events").glob("study=*")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.01)
    return proc


def open_reader(wh: Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection, asked again while it meets one of the ingest's short catalog phases."""
    for _ in range(100):
        try:
            return duckdb.connect(str(wh / "tracehouse.duckdb"), read_only=True)
        except duckdb.IOException:
            time.sleep(0.01)
    raise AssertionError("the ingest never let a reader in")


def finished(proc: subprocess.Popen) -> tuple[int, str]:
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


@pytest.mark.slow
def test_a_query_answers_while_an_ingest_runs(tmp_path, capsys):
    wh = tmp_path / "wh"
    proc = start_ingest(inputs(tmp_path / "run"), wh)
    answers = []
    while proc.poll() is None and not answers:
        capsys.readouterr()
        code = main(["query", "SELECT count(*) AS n FROM traces", "--warehouse", str(wh), "--format", "csv"])
        out = capsys.readouterr().out
        if code == 0 and proc.poll() is None:  # a query may meet a short catalog phase: it is asked again
            answers.append(int(out.splitlines()[1]))
    assert finished(proc)[0] == 0
    assert answers and 0 <= answers[0] < N_FILES, "no query was answered while the ingest ran"
    assert count(wh, "traces") == N_FILES


@pytest.mark.slow
def test_a_reader_holding_the_file_delays_registration_and_loses_nothing(tmp_path):
    run, wh = inputs(tmp_path / "run"), tmp_path / "wh"
    proc = start_ingest(run, wh)
    with open_reader(wh) as reader:
        held = reader.sql("SELECT count(*) FROM traces").fetchall()[0][0]
        time.sleep(2)
        assert proc.poll() is None or held < N_FILES
    code, err = finished(proc)
    assert code == 0, err
    ingest([run], tmp_path / "clean")
    assert checksums(wh) == checksums(tmp_path / "clean")


@pytest.mark.slow
def test_a_second_ingest_meanwhile_is_one_busy_line_and_harms_nothing(tmp_path, capsys):
    run, wh = inputs(tmp_path / "run"), tmp_path / "wh"
    other = write_trace(tmp_path / "other" / "r0.json", rank=0)
    proc = start_ingest(run, wh)
    capsys.readouterr()
    code = main(["ingest", str(other.parent), "--warehouse", str(wh)])
    err = capsys.readouterr().err
    assert proc.poll() is None, "the first ingest ended too soon; make the input larger"
    # (Usually the ingest lock; rarely the first ingest's catalog phase, met while opening the file.)
    assert code == 2 and err.startswith(f"tracehouse ingest: error: {wh}: busy: ") and err.count("\n") == 1
    assert finished(proc)[0] == 0
    ingest([run], tmp_path / "clean")
    assert checksums(wh) == checksums(tmp_path / "clean")


def hold_read_only(db: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the DuckDB file read-only for some seconds; returns once it holds it."""
    code = (
        "import sys, time, duckdb; c = duckdb.connect(sys.argv[1], read_only=True); "
        f"print('ready', flush=True); time.sleep({seconds})"
    )
    reader = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    assert reader.stdout.readline() == "ready\n"
    return reader


def two_rank_run(folder: Path) -> Path:
    for rank in range(2):
        write_trace(folder / f"r{rank}.json", rank=rank, world_size=2)
    return folder


def test_a_reader_that_opens_a_new_catalog_at_once_is_waited_for(tmp_path, monkeypatch):
    """Into a new warehouse the tasks run while the catalog is made: a reader may open it between
    its creation and the ingest's first catalog phase, which then waits instead of failing."""
    import tracehouse.pipeline.ingest.driver as driver_module
    import tracehouse.pipeline.ingest.load as load_module
    from tracehouse.pipeline.ingest.engine import THREADS

    real_create = load_module.create_warehouse
    readers: list[subprocess.Popen] = []

    def create_then_read(warehouse_dir, **options):
        real_create(warehouse_dir, **options)
        readers.append(hold_read_only(Path(warehouse_dir) / "tracehouse.duckdb", 1.0))

    monkeypatch.setattr(load_module, "create_warehouse", create_then_read)
    monkeypatch.setattr(driver_module, "local_engine", lambda sizes: (THREADS, 2))
    summary = ingest([two_rank_run(tmp_path / "run")], tmp_path / "wh")
    assert len(readers) == 1 and readers[0].wait(timeout=30) == 0
    assert (summary.loaded, summary.failed) == (2, [])


def test_a_reader_that_opens_the_copied_catalog_before_the_ingest_does_is_waited_for(tmp_path, monkeypatch):
    """A new catalog is readable from the moment it is copied into place, before the ingest opens
    it to complete it: a reader there makes the ingest wait, not fail (CI met it once)."""
    import tracehouse.pipeline.ingest.driver as driver_module
    import tracehouse.pipeline.warehouse.database as database_module
    from tracehouse.pipeline.ingest.engine import THREADS

    real_copy = database_module._copy_template
    readers: list[subprocess.Popen] = []

    def copy_then_read(warehouse_dir):
        real_copy(warehouse_dir)
        readers.append(hold_read_only(database_module.db_path(warehouse_dir), 1.0))

    monkeypatch.setattr(database_module, "_copy_template", copy_then_read)
    monkeypatch.setattr(driver_module, "local_engine", lambda sizes: (THREADS, 2))
    summary = ingest([two_rank_run(tmp_path / "run")], tmp_path / "wh")
    assert len(readers) == 1 and readers[0].wait(timeout=30) == 0
    assert (summary.loaded, summary.failed) == (2, [])
    assert not list((tmp_path / "wh").glob("*.copying"))
