"""SIGTERM or Ctrl-C of a real `tracehouse collect` leaves no torchrun and no rank running (CPU, gloo)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process groups from /proc"),
]


def processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, process group, state) of every process, from /proc."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        found[int(stat.parent.name)] = (int(fields[1]), int(fields[2]), fields[0])
    return found


def descendants(pid: int) -> set[int]:
    table = processes()
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, (parent, _, _) in table.items() if parent in frontier} - found
        found |= frontier
    return found


def live_in_groups(groups: set[int]) -> list[int]:
    return [p for p, (_, group, state) in processes().items() if group in groups and state != "Z"]


def rank_pids(pid: int) -> set[int]:
    ranks = set()
    for child in descendants(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"tracehouse.collectors.train" in cmdline and b"torch.distributed.run" not in cmdline:
            ranks.add(child)
    return ranks


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_collect_leaves_no_process_behind(tmp_path: Path, signum: signal.Signals) -> None:
    command = [sys.executable, "-m", "tracehouse.pipeline.cli", "collect", "--model", "tiny"]
    command += ["--strategy", "ddp", "--world-size", "2", "--steps", "200", "--out", str(tmp_path)]
    collect = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while len(rank_pids(collect.pid)) < 2:
            assert collect.poll() is None, collect.communicate()
            assert time.monotonic() < deadline, "the ranks did not start"
            time.sleep(0.2)
        groups = {processes()[p][1] for p in descendants(collect.pid) | {collect.pid} if p in processes()}
        assert len(groups) >= 2  # collect's own group and torchrun's session
        os.kill(collect.pid, signum)  # SIGINT: what Ctrl-C sends to the foreground process
        _, err = collect.communicate(timeout=30)
        assert collect.returncode == 130
        assert err.decode().strip().splitlines()[-1] == "tracehouse collect: interrupted"
        deadline = time.monotonic() + 5
        while live_in_groups(groups) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert live_in_groups(groups) == []
    finally:
        for group in {processes().get(p, (0, 0, ""))[1] for p in descendants(collect.pid)} - {0}:
            with suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        if collect.poll() is None:
            os.killpg(collect.pid, signal.SIGKILL)
            collect.wait()
