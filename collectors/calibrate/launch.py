"""Launch a calibration sweep under a real torchrun and write its nccl-tests files into one folder.

OUT/ after a sweep:

    all_reduce_perf.txt ... sendrecv_perf.txt   one per measured op, the nccl-tests 2.17 layout
    calibration.json                            the resolved sweep, hosts, versions, skips, wall time
    calibrate.log                               torchrun's and the ranks' output
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tracehouse.collectors.calibrate.nccl_layout import RunHeader, render
from tracehouse.collectors.calibrate.results import CalibrationResult
from tracehouse.collectors.calibrate.spec import (
    BACKENDS,
    DTYPE,
    OPS,
    PROGRESS_MARK,
    CalibrationSpec,
    perf_file_name,
)
from tracehouse.collectors.launch import child_env, now_iso
from tracehouse.pipeline.common.errors import TracehouseError

LOG_NAME = "calibrate.log"
REPORT_NAME = "calibration.json"
# The sweep handed to the ranks and rank 0's result: in a temporary folder on one node, in the
# output folder (seen by every node) for a multi-node sweep.
SPEC_NAME = "calibrate_spec.json"
RESULT_NAME = "calibrate_result.json"
# What a reader of the files must know about how their numbers were made.
METHOD = {
    "time": "mean per iteration of the timed iterations, the slowest rank's (nccl-tests -a 3)",
    "sizes": "min_bytes doubling to max_bytes; a printed size is max(send, receive) bytes per rank",
    "in_place_only": "torch's all_reduce and broadcast are in-place only: both placements time the "
    "same in-place call, measured separately",
    "in_place_unvalidated": "alltoall and sendrecv in-place alias the send and receive buffer, as "
    "nccl-tests does; their #wrong is N/A",
    "call_overhead": "every time is less call_overhead_us, the host time of a call that moves nothing "
    "(the smallest all_reduce on a one-rank group: Python, c10d, the backend's call; the least over "
    "ranks), which the replay counts apart from the transfer; at least 1 % of the measured time is "
    "kept; uncorrected_time_us holds the times before",
}


class CalibrationError(TracehouseError):
    """A calibration sweep that could not run or did not finish."""


def resolve_backend(backend: str) -> str:
    """gloo or nccl; auto picks nccl when CUDA GPUs are available."""
    if backend == "auto":
        import torch  # only here: choosing needs to look at the machine

        return "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known: auto, {', '.join(BACKENDS)}")
    return backend


def check_machine(spec: CalibrationSpec) -> None:
    """NCCL needs one GPU per rank of this node."""
    if spec.backend != "nccl":
        return
    import torch

    gpus = torch.cuda.device_count()
    if gpus < spec.per_node:
        where = f"world size {spec.world_size}" + (f" over {spec.nodes} nodes" if spec.nodes > 1 else "")
        raise CalibrationError(
            f"--backend nccl at {where} needs {spec.per_node} CUDA GPUs on this node, "
            f"found {gpus}; use --backend gloo or a smaller --world-size"
        )


def torchrun_command(
    spec: CalibrationSpec, spec_path: Path, result_path: Path, rendezvous: list[str] | None = None
) -> list[str]:
    """The torchrun of the worker, one process per rank of this node: standalone on one node,
    else with the rendezvous flags given (--nnodes, --nproc_per_node, --rdzv-*)."""
    where = rendezvous or ["--standalone", "--nnodes", "1", "--nproc_per_node", str(spec.world_size)]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *where,
        "-m",
        "tracehouse.collectors.calibrate.worker",
        "--spec",
        str(spec_path),
        "--result",
        str(result_path),
    ]


def run_streaming(
    command: list[str], log_path: Path, timeout_s: float, on_progress: Callable[[str], None]
) -> str | None:
    """Run torchrun with its output in log_path, passing progress lines on; None or a one-line failure."""
    with log_path.open("ab") as log:
        # Its own session, so a timeout can stop torchrun and every rank it started.
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=child_env(), start_new_session=True
        )
        timed_out = threading.Event()

        def stop() -> None:
            timed_out.set()
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, stop)
        timer.start()
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                log.write(raw)
                log.flush()
                text = raw.decode(errors="replace").rstrip("\n")
                if text.startswith(PROGRESS_MARK):
                    on_progress(text[len(PROGRESS_MARK) :])
            returncode = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:  # interrupted: leave no rank behind
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if timed_out.is_set():
        return f"torchrun timed out after {timeout_s:g} s; see {log_path}"
    if returncode != 0:
        return f"torchrun exited with status {returncode}; see {log_path}"
    return None


def tracehouse_version() -> str:
    """The installed tracehouse version."""
    try:
        return metadata.version("tracehouse")
    except metadata.PackageNotFoundError:
        return "unknown"


def version_line(result: CalibrationResult) -> str:
    """What follows `# nccl-tests version `: who wrote the file, with which backend and libraries."""
    parts = [f"tracehouse-calibrate {tracehouse_version()}", f"backend={result.backend}"]
    parts.append(f"torch={result.torch_version}")
    if result.nccl_version:
        # nccl-tests' own key and encoding (NCCL_VERSION_CODE), so readers of real output find it
        major, minor, patch = (int(part) for part in result.nccl_version.split(".")[:3])
        parts.append(f"nccl-library={major * 10000 + minor * 100 + patch}")
    return " ".join(parts)


@dataclass(frozen=True, kw_only=True)
class CalibrationReport:
    """What a sweep wrote."""

    out_dir: Path
    files: tuple[Path, ...]  # the nccl-tests files, in op order
    skipped: dict[str, str]  # op -> why it was not measured
    wall_s: float
    result: CalibrationResult


def clear_outputs(out_dir: Path) -> None:
    """Remove what an earlier sweep left, so a skipped op's old file is not mistaken for new."""
    for name in [perf_file_name(op) for op in OPS] + [REPORT_NAME, LOG_NAME]:
        (out_dir / name).unlink(missing_ok=True)


def report_json(
    spec: CalibrationSpec, result: CalibrationResult, files: dict[str, str], run: dict[str, Any]
) -> dict[str, Any]:
    """calibration.json: the sweep as run, where it ran, what it wrote and skipped."""
    return {
        "tool": f"tracehouse calibrate {tracehouse_version()}",
        "world_size": spec.world_size,
        "backend": spec.backend,
        "hosts": result.hosts,
        "nodes": len(result.hosts),
        "torch_version": result.torch_version,
        "nccl_version": result.nccl_version,
        "dtype": DTYPE,
        "sizes_bytes": spec.sizes(),
        "spec": spec.to_dict(),
        "files": files,
        "skipped": result.skipped,
        "call_overhead_us": result.call_overhead_us,
        "uncorrected_time_us": result.uncorrected(),
        "method": METHOD,
        "ranks": [dataclasses.asdict(rank) for rank in result.ranks],
        **run,
    }


def run_calibration(
    spec: CalibrationSpec,
    out_dir: Path,
    *,
    on_progress: Callable[[str], None] = lambda line: None,
    rendezvous: list[str] | None = None,
) -> CalibrationReport:
    """Run the sweep into out_dir (one nccl-tests file per measured op); CalibrationError on failure.
    With rendezvous flags this is node 0 of a multi-node sweep (calibrate.cluster): the spec and
    rank 0's result pass through out_dir, which every node must see."""
    check_machine(spec)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    clear_outputs(out_dir)
    started_at, started = now_iso(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tracehouse-calibrate-") as work:
        folder = out_dir if rendezvous else Path(work)
        spec_path, result_path = folder / SPEC_NAME, folder / RESULT_NAME
        result_path.unlink(missing_ok=True)
        if not (rendezvous and spec_path.is_file()):  # the other nodes may be reading it already
            spec.write(spec_path)
        command = torchrun_command(spec, spec_path, result_path, rendezvous)
        failure = run_streaming(command, out_dir / LOG_NAME, spec.timeout_s, on_progress)
        if failure:
            raise CalibrationError(failure)
        if not result_path.is_file():
            raise CalibrationError(f"rank 0 wrote no result; see {out_dir / LOG_NAME}")
        result = CalibrationResult.read(result_path)
        result_path.unlink()
    return write_outputs(spec, result, out_dir, command, started_at, time.perf_counter() - started)


def write_outputs(
    spec: CalibrationSpec,
    result: CalibrationResult,
    out_dir: Path,
    command: list[str],
    started_at: str,
    wall_s: float,
) -> CalibrationReport:
    """The nccl-tests files and calibration.json of a finished sweep."""
    header = RunHeader(
        version=version_line(result),
        min_bytes=spec.min_bytes,
        max_bytes=spec.max_bytes,
        warmup=spec.warmup,
        iters=spec.iters,
    )
    files = []
    for table in result.tables:
        path = out_dir / perf_file_name(table.op)
        path.write_text(render(table, result.ranks, header))
        files.append(path)
    run = {"started_at": started_at, "ended_at": now_iso(), "wall_s": round(wall_s, 3)}
    run |= {"command": command[:-4], "log": LOG_NAME}  # the spec and result paths are gone
    written = {table.op: path.name for table, path in zip(result.tables, files, strict=True)}
    (out_dir / REPORT_NAME).write_text(json.dumps(report_json(spec, result, written, run), indent=2) + "\n")
    return CalibrationReport(
        out_dir=out_dir, files=tuple(files), skipped=result.skipped, wall_s=wall_s, result=result
    )
