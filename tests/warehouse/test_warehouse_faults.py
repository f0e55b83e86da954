"""Faults named as faults: a full disk or a read-only warehouse is one line and exit 2, never a bug.

Nothing is half-registered (no run without its traces), and the next ingest with room finishes
the job. The disk is a real tmpfs of a few MB, mounted for the test (root only, else skipped).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.testdata import SAMPLE_TRACES
from support.wh_helpers import checksums, count, write_trace
from tracehouse.pipeline.common.errors import system_fault
from tracehouse.pipeline.ingest.driver import ingest

STUDY = SAMPLE_TRACES / "tiny-cpu-gloo"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs (the sample study needs about 10 MB)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4M", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def tracehouse(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tracehouse.pipeline.cli", *args], capture_output=True, text=True, timeout=300
    )


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ": error: " in line]


@pytest.mark.slow
def test_a_full_disk_stops_the_ingest_in_one_line_and_the_next_finishes_it(small_disk, tmp_path):
    wh = small_disk / "wh"
    full = tracehouse("ingest", str(STUDY), "--warehouse", str(wh))
    assert full.returncode == 2, full.stderr
    [line] = error_lines(full.stderr)
    assert "No space left on device (os error 28)" in line and "internal error" not in full.stderr
    assert line.endswith("run the same ingest again")
    # no run without its traces: every registered run has one
    untraced = "run_manifests AS m WHERE NOT EXISTS (SELECT 1 FROM traces AS t WHERE t.run_id = m.run_id)"
    assert count(wh, untraced) == 0
    subprocess.run(["mount", "-o", "remount,size=64M", str(small_disk)], check=True)
    again = tracehouse("ingest", str(STUDY), "--warehouse", str(wh))
    assert again.returncode == 0, again.stderr
    ingest([STUDY], tmp_path / "clean")
    assert checksums(wh) == checksums(tmp_path / "clean")


@pytest.mark.slow
def test_a_read_only_warehouse_is_one_line_and_still_answers_queries(small_disk, tmp_path):
    subprocess.run(["mount", "-o", "remount,size=64M", str(small_disk)], check=True)
    wh = small_disk / "wh"
    first = write_trace(tmp_path / "in" / "a.json", rank=None)
    assert ingest([first], wh).loaded == 1
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    second = write_trace(tmp_path / "more" / "b.json", rank=None, n_kernels=5)
    refused = tracehouse("ingest", str(second), "--warehouse", str(wh))
    assert refused.returncode == 2
    assert error_lines(refused.stderr) == [
        f"tracehouse ingest: error: {wh}: cannot write: Read-only file system (os error 30)"
    ]
    answered = tracehouse("query", "select run_id from runs", "--warehouse", str(wh), "--format", "csv")
    assert answered.returncode == 0 and answered.stdout.split() == ["run_id", "a"]


def test_system_faults_are_found_under_the_libraries_wrapping():
    assert system_fault(OSError(28, "No space left on device")) == "No space left on device (os error 28)"
    wrapped = RuntimeError("parquet: File out of specification: underlying IO error: ... (os error 30)")
    assert system_fault(wrapped) == "Read-only file system (os error 30)"
    try:
        try:
            raise OSError(13, "Permission denied")
        except OSError as inner:
            raise ValueError("could not write") from inner
    except ValueError as outer:
        assert system_fault(outer) == "Permission denied (os error 13)"
    assert system_fault(ValueError("not a fault (os error 2)")) is None  # ENOENT: a file's problem
