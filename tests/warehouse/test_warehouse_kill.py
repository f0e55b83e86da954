"""SIGKILL a real ingest mid-way, re-run it: the warehouse must equal a clean ingest."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.wh_helpers import checksums, count, write_trace
from tracehouse.pipeline.ingest.driver import ingest

N_FILES = 24


N_KERNELS = 1500
# The kill comes once this many files' partitions are written: the tasks run ahead of the
# registration (on threads, many at once), and a reader's connection would stop the ingest,
# so the written partitions are the signal; by half of them the first catalog phase (at the
# first outcome) has committed.
KILL_AFTER = N_FILES // 2


def written_partitions(wh: Path) -> int:
    return sum(1 for p in (wh / "parquet" / "events").rglob("*.parquet") if p.name != "_empty.parquet")


def kill_after_partitions(command: list[str], killed: Path, n: int) -> int:
    """Run the ingest, SIGKILL it once n partitions are written; the traces then registered."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while written_partitions(killed) < n and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, "ingest finished before the kill; make the input larger"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return count(killed, "traces") if (killed / "tracehouse.duckdb").exists() else 0


@pytest.mark.slow
def test_kill_mid_ingest_then_rerun_equals_clean_ingest(tmp_path):
    for rank in range(N_FILES):
        path = tmp_path / "run" / f"rank{rank:02d}.json"
        write_trace(path, rank=rank, world_size=N_FILES, n_kernels=N_KERNELS)
    killed = tmp_path / "killed"
    command = [
        sys.executable,
        "-m",
        "tracehouse.pipeline.cli",
        "ingest",
        str(tmp_path / "run"),
        "--warehouse",
        str(killed),
        "--study",
        "kill",
    ]
    # The kill must land after the first catalog phase committed: on a loaded machine the workers
    # can run further ahead of the driver, so a kill that found nothing registered is tried later.
    for kill_after in (KILL_AFTER, N_FILES * 3 // 4, N_FILES - 2):
        shutil.rmtree(killed, ignore_errors=True)
        loaded = kill_after_partitions(command, killed, kill_after)
        if loaded > 0:
            break
    # After the kill: whatever is registered is whole, and nothing else is visible.
    assert 0 < loaded < N_FILES
    assert count(killed, "events") == loaded * (1 + 2 * N_KERNELS)

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    ingest([tmp_path / "run"], tmp_path / "clean", study="kill")
    assert checksums(killed) == checksums(tmp_path / "clean")
    assert count(killed, "traces") == N_FILES
    assert not [p for p in killed.rglob("*") if ".tmp" in p.name]


DRIVER = """
import sys
import tracehouse.pipeline.ingest.driver as driver

driver.local_engine = lambda sizes: ("processes", 2)  # the local pool, whatever the batch's size
if __name__ == "__main__":
    driver.ingest([sys.argv[1]], sys.argv[2], study="kill")
"""


def process_group(pgid: int) -> list[int]:
    """The ids of the live (not zombie) processes in a process group, read from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process groups from /proc")
def test_a_killed_driver_leaves_no_pool_process_behind(tmp_path):
    for rank in range(N_FILES):
        write_trace(
            tmp_path / "run" / f"rank{rank:02d}.json", rank=rank, world_size=N_FILES, n_kernels=N_KERNELS
        )
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    wh = tmp_path / "wh"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "run"), str(wh)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while written_partitions(wh) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert proc.poll() is None, "ingest finished before the kill; make the input larger"
    assert len(process_group(proc.pid)) >= 3  # the driver, the pool's server and its workers
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while process_group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = process_group(proc.pid)
    for pid in left:  # do not leave them to the next test
        os.kill(pid, signal.SIGKILL)
    assert left == [], "pool processes outlived the killed driver"
