"""A real Dask cluster for tests (`dask scheduler` and `dask worker` processes on 127.0.0.1), and the
small study the cluster tests ingest."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tracehouse.pipeline.common.manifest import PowerCapture, RunManifest

from support.testdata import shared_path
from support.wh_helpers import write_trace

DASK = str(Path(sys.executable).parent / "dask")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dask_cluster(workers: int = 2, *, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """A scheduler and `workers` one-thread workers (with `env`, else this process's environment);
    yields the scheduler's address, and stops every process on exit."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [
        subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], **quiet
        )
    ]
    try:
        for _ in range(workers):
            procs.append(
                subprocess.Popen(
                    [DASK, "worker", address, "--no-dashboard", "--nthreads", "1", "--host", "127.0.0.1"],
                    env=None if env is None else dict(env),
                    **quiet,
                )
            )
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
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
