"""Ingest through a real Dask cluster (scheduler + two workers) equals the local ingest exactly."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.testdata import shared_path
from support.wh_helpers import checksums, count, write_trace
from tracehouse.pipeline.common.manifest import PowerCapture, RunManifest
from tracehouse.pipeline.ingest.driver import ingest

DASK = str(Path(sys.executable).parent / "dask")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster():
    """A real `dask scheduler` and two `dask worker` processes on 127.0.0.1; yields the address."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [
        subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [DASK, "worker", address, "--no-dashboard", "--nthreads", "1", "--host", "127.0.0.1"],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def study_inputs(root: Path) -> list[Path]:
    """Two runs of two ranks, one with a manifest and a real power log, plus a bad file and a rank clash."""
    run1 = root / "run1"
    for rank in range(2):
        write_trace(run1 / f"r{rank}.json", rank=rank, n_kernels=50 + rank)
    power = shared_path("power/nvidia-smi/wrapper_8gpu_power_log.csv")
    shutil.copy(power, run1 / power.name)  # a manifest names files in its own folder only
    RunManifest(study="s", run_id="one", world_size=2, dp=2, power=PowerCapture(files=[power.name])).write(
        run1
    )
    write_trace(root / "run2" / "a.json.gz", rank=0, n_kernels=7)
    write_trace(root / "run2" / "b.json", rank=1, n_kernels=9)
    write_trace(root / "run3" / "x.json", rank=0)
    write_trace(root / "run3" / "y.json", rank=0, n_kernels=4)
    RunManifest(study="s", run_id="three").write(root / "run3")  # one run: the clash is an error
    (root / "run2" / "broken.json").write_text('{"traceEvents": [')
    return [root / "run1", root / "run2", root / "run3"]


@pytest.mark.slow
def test_distributed_ingest_equals_local(tmp_path, cluster):
    paths = study_inputs(tmp_path / "in")
    local = ingest(paths, tmp_path / "local", study="s")
    remote = ingest(paths, tmp_path / "remote", study="s", scheduler=cluster)
    assert (remote.loaded, remote.power_files, remote.events) == (
        local.loaded,
        local.power_files,
        local.events,
    )
    assert (local.loaded, local.power_files, len(local.failed)) == (4, 1, 3)
    assert sorted(remote.failed) == sorted(local.failed)
    assert checksums(tmp_path / "remote") == checksums(tmp_path / "local")
    assert count(tmp_path / "remote", "power_samples") == 43
    again = ingest(paths, tmp_path / "remote", study="s", scheduler=cluster)
    assert again.loaded == 0 and again.skipped == 5


@pytest.mark.slow
@pytest.mark.parametrize("engine", [("threads", 2), ("processes", 2)])
def test_every_local_engine_equals_in_process(tmp_path, monkeypatch, engine):
    import tracehouse.pipeline.ingest.driver as ingest_module

    paths = study_inputs(tmp_path / "in")
    monkeypatch.setattr(ingest_module, "local_engine", lambda sizes: ("in-process", 1))
    local = ingest(paths, tmp_path / "inproc", study="s")
    monkeypatch.setattr(ingest_module, "local_engine", lambda sizes: engine)
    other = ingest(paths, tmp_path / "other", study="s")
    assert (other.loaded, other.power_files, sorted(other.failed)) == (
        local.loaded,
        local.power_files,
        sorted(local.failed),
    )
    assert (local.loaded, local.power_files, len(local.failed)) == (4, 1, 3)
    assert checksums(tmp_path / "other") == checksums(tmp_path / "inproc")
