"""`tracehouse query` only reads: a busy warehouse is one line, a stale one is answered without a write."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from support.wh_helpers import write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.warehouse import database

GPU_EVENTS = "SELECT name, class FROM gpu_events ORDER BY name"
BUSY = (
    "tracehouse {command}: error: {wh}: busy: another tracehouse process (an ingest?) has been writing it "
    "for over 3 s; retry when it finishes\n"
)
# Two ways the warehouse notices that its views and tables are out of date.
STALE = {
    "pattern added by hand": "INSERT INTO comm_kernel_patterns VALUES ('gemm_1', 'test')",
    "older sql": "UPDATE warehouse_meta SET value = 'older' WHERE key = 'sql_digest'",
}


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    write_trace(tmp_path / "run" / "r0.json", rank=0, n_kernels=2)
    write_trace(tmp_path / "run" / "r1.json", rank=1, n_kernels=3)
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(tmp_path / "wh")]) == 0
    return tmp_path / "wh"


def files_state(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under the folder: its content digest and modification time."""
    return {
        str(p.relative_to(folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run_query(capsys, wh: Path, sql: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["query", sql, "--warehouse", str(wh), "--format", "csv"])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def writer(wh: Path):
    """Another process holding the warehouse open read-write, as an ingest does."""
    code = "import sys, duckdb; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); sys.stdin.read()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(wh / "tracehouse.duckdb")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "ready\n"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=30)


def test_query_while_another_process_writes_is_one_busy_line(capsys, wh, writer) -> None:
    code, out, err = run_query(capsys, wh, "SELECT 1")
    assert code == 2 and out == ""
    assert err == BUSY.format(command="query", wh=wh)


def test_report_while_another_process_writes_is_one_busy_line(capsys, wh, writer, tmp_path) -> None:
    capsys.readouterr()
    code = main(["report", "--warehouse", str(wh), "-o", str(tmp_path / "r.html")])
    assert code == 2
    assert capsys.readouterr().err == BUSY.format(command="report", wh=wh)


class _NoRetry:
    """The time module as the warehouse's open sees it, where a retry (a sleep) is a failure."""

    monotonic = staticmethod(time.monotonic)

    @staticmethod
    def sleep(seconds: float) -> None:
        raise AssertionError(f"the open was retried ({seconds} s): a busy warehouse is one line at once")


def test_ingest_while_another_process_has_it_open_is_one_busy_line(capsys, wh, writer, monkeypatch) -> None:
    monkeypatch.setattr(database, "time", _NoRetry)  # no waiting for it: the line comes at once
    capsys.readouterr()
    assert main(["ingest", str(wh.parent / "run"), "--warehouse", str(wh)]) == 2
    assert capsys.readouterr().err == (
        f"tracehouse ingest: error: {wh}: busy: another process (a query or an ingest?) has it open; "
        "retry when it finishes\n"
    )


def make_stale(wh: Path, statement: str) -> None:
    with duckdb.connect(str(wh / "tracehouse.duckdb")) as c:
        c.execute(statement)


@pytest.mark.parametrize("how", sorted(STALE))
def test_a_query_on_a_stale_warehouse_writes_nothing(capsys, wh, how) -> None:
    make_stale(wh, STALE[how])
    before = files_state(wh)
    code, out, err = run_query(capsys, wh, GPU_EVENTS)
    assert (code, err) == (0, "")
    assert files_state(wh) == before
    if how == "pattern added by hand":  # the answer already counts the new pattern
        assert "gemm_1,comm" in out.splitlines() and "gemm_0,compute" in out.splitlines()


@pytest.mark.parametrize("how", sorted(STALE))
def test_a_stale_answer_equals_the_answer_after_a_refresh(capsys, wh, how) -> None:
    make_stale(wh, STALE[how])
    sql = "SELECT rank, step, compute_us, exposed_comm_us, idle_us FROM step_breakdown ORDER BY ALL"
    stale = run_query(capsys, wh, sql)
    assert main(["ingest", str(wh.parent / "run"), "--warehouse", str(wh)]) == 0  # stores fresh tables
    before = files_state(wh)
    assert run_query(capsys, wh, sql) == stale
    assert files_state(wh) == before


def test_a_report_on_a_stale_warehouse_writes_nothing(wh, tmp_path) -> None:
    make_stale(wh, STALE["pattern added by hand"])
    before = files_state(wh)
    assert main(["report", "--warehouse", str(wh), "-o", str(tmp_path / "r.html")]) == 0
    assert files_state(wh) == before
