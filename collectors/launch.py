"""Launch one scale point: a real torchrun under power capture, then the manifest beside the traces.

Locally the sweep runner calls `run_point`; on a cluster each node's srun task runs
`python -m tracehouse.collectors.launch --run-dir DIR -- <torchrun rendezvous flags>`,
and node 0 writes the manifest.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path

from tracehouse.collectors.power import capture_power
from tracehouse.collectors.run_manifest import build_manifest
from tracehouse.collectors.spec import (
    DEFAULT_TIMEOUT_S,
    FACTS_NAME,
    LOG_NAME,
    LOSS_NAME,
    SPEC_NAME,
    RunSpec,
    trace_name,
)
from tracehouse.pipeline.common.manifest import MANIFEST_NAME, NODE_POWER_TEMPLATE, PowerCapture, RunManifest

# Seconds torchrun has to stop its ranks after SIGTERM before the whole group is killed.
STOP_GRACE_S = 10.0
# Seconds node 0 waits, after its torchrun ended, for the other nodes' reports (their torchrun
# ends with the same collective, their sampler stops within seconds).
NODE_REPORT_WAIT_S = 120.0


def now_iso() -> str:
    """The current UTC time, ISO-8601."""
    return datetime.now(timezone.utc).isoformat()


def torchrun_command(spec: RunSpec, run_dir: Path, rendezvous: list[str] | None = None) -> list[str]:
    """The torchrun command of one scale point (standalone unless rendezvous flags are given)."""
    where = rendezvous or ["--standalone", "--nnodes", "1", "--nproc_per_node", str(spec.world_size)]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *where,
        "-m",
        "tracehouse.collectors.train",
        "--spec",
        str(run_dir / SPEC_NAME),
    ]


def child_env() -> dict[str, str]:
    """The ranks' environment: one intra-op thread each, never DETAIL debug (DDP on CPU segfaults),
    CUDA ordinals in PCI bus order (NVML's, so the power logs' GPU identities map onto them)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if env.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL":
        env["TORCH_DISTRIBUTED_DEBUG"] = "INFO"
    return env


def clear_outputs(run_dir: Path, world_size: int) -> None:
    """Remove what an earlier run of this point left, so nothing stale is mistaken for new."""
    names = [MANIFEST_NAME, LOSS_NAME, FACTS_NAME, LOG_NAME] + [trace_name(r) for r in range(world_size)]
    names += [NODE_POWER_TEMPLATE.format(node=node) for node in range(1, world_size)]
    for name in names:
        (run_dir / name).unlink(missing_ok=True)


@contextmanager
def interrupt_on_sigterm() -> Iterator[None]:
    """While the block runs, SIGTERM (a `kill`, SLURM's scancel) raises KeyboardInterrupt as Ctrl-C
    does, so every `finally` runs: torchrun's process group is stopped, the power sampler too."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return

    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def process_groups_below(pid: int) -> set[int]:
    """The process groups of pid and every process under it, from /proc (empty where there is none).
    torchrun starts each rank in a group of its own."""
    parents: dict[int, tuple[int, int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(stat.parent.name)] = (int(fields[1]), int(fields[2]))
    below, frontier = {pid}, {pid}
    while frontier:
        frontier = {p for p, (parent, _) in parents.items() if parent in frontier} - below
        below |= frontier
    return {parents[p][1] for p in below if p in parents}


def stop_group(proc: subprocess.Popen) -> None:
    """Stop torchrun and every rank: SIGTERM to torchrun's group (torchrun passes it to the ranks),
    STOP_GRACE_S to exit, then SIGKILL to every process group torchrun and its ranks were in."""
    groups = process_groups_below(proc.pid) | {proc.pid}
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_GRACE_S)
    for group in groups:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    proc.wait()


def run_torchrun(command: list[str], log_path: Path, timeout_s: float) -> str | None:
    """Run torchrun with its output in log_path; None on success, else a one-line failure."""
    with log_path.open("ab") as log:
        # Its own session, so a timeout can stop torchrun and every rank it started.
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=child_env(), start_new_session=True
        )
        try:
            returncode = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return f"torchrun timed out after {timeout_s:g} s; see {log_path}"
        finally:
            if proc.poll() is None:  # interrupted (Ctrl-C, SIGTERM): leave no rank behind
                stop_group(proc)
    if returncode != 0:
        return f"torchrun exited with status {returncode}; see {log_path}"
    return None


def write_node_power(run_dir: Path, node: int, power: PowerCapture) -> None:
    """A node > 0's power capture, for node 0 to merge (written atomically: node 0 polls for it)."""
    target = run_dir / NODE_POWER_TEMPLATE.format(node=node)
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(dataclasses.asdict(power), indent=2) + "\n")
    tmp.replace(target)


def read_node_reports(run_dir: Path, nodes: int, wait_s: float) -> dict[int, PowerCapture | None]:
    """Each other node's power capture, None for a node that reported nothing within wait_s."""
    deadline = time.monotonic() + wait_s
    paths = {node: run_dir / NODE_POWER_TEMPLATE.format(node=node) for node in range(1, nodes)}
    while not all(path.is_file() for path in paths.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    reports: dict[int, PowerCapture | None] = {}
    for node, path in paths.items():
        try:
            reports[node] = PowerCapture(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            reports[node] = None
    return reports


def merge_power(own: PowerCapture, reports: dict[int, PowerCapture | None]) -> PowerCapture:
    """Node 0's capture with every other node's logs added, and what went wrong where."""
    nodes = {0: own, **reports}
    captured = [c for c in nodes.values() if c is not None]
    sources = sorted({c.source for c in captured if c.source})
    problems = [node_problem(node, c, others_captured=bool(sources)) for node, c in nodes.items()]
    reasons = [f"node {n}: {c.unavailable_reason}" for n, c in nodes.items() if c and c.unavailable_reason]
    return PowerCapture(
        source=",".join(sources) or None,
        unavailable_reason=None if sources else " | ".join(reasons),
        files=[name for c in captured for name in c.files],
        interval_ms=next((c.interval_ms for c in captured if c.interval_ms is not None), None),
        failure="; ".join(p for p in problems if p) or None,
    )


def node_problem(node: int, capture: PowerCapture | None, *, others_captured: bool) -> str | None:
    """What went wrong with one node's power capture, None when nothing did."""
    if capture is None:
        return f"node {node}: no power report within {NODE_REPORT_WAIT_S:g} s (ingest adds a later one)"
    if capture.failure:
        return f"node {node}: {capture.failure}"
    if capture.unavailable_reason and others_captured:  # its GPUs' energy is missing from the run's
        return f"node {node}: {capture.unavailable_reason}"
    return None


def run_point(
    spec: RunSpec,
    out_dir: Path,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    rendezvous: list[str] | None = None,
    node: int = 0,
) -> RunManifest:
    """Run one scale point into out_dir/<run_id>/ and return its manifest (status ok or failed).

    node > 0 is another node of a multi-node run: it logs to its own file and leaves the
    manifest (and clearing old outputs) to node 0, and reports its power capture in
    `power.node<N>.json`; node 0 waits for every node's report and lists all their power logs.
    """
    run_dir = Path(out_dir) / spec.run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    if node == 0:
        clear_outputs(run_dir, spec.world_size)
        spec.write(run_dir)
    command = torchrun_command(spec, run_dir, rendezvous)
    log_path = run_dir / (LOG_NAME if node == 0 else f"train.node{node}.log")
    started_at = now_iso()
    with interrupt_on_sigterm(), capture_power(run_dir) as power:
        failure = run_torchrun(command, log_path, timeout_s)
    if node > 0:
        write_node_power(run_dir, node, power)
    elif spec.nodes > 1:
        power = merge_power(power, read_node_reports(run_dir, spec.nodes, NODE_REPORT_WAIT_S))
    manifest = build_manifest(
        spec,
        run_dir,
        power=power,
        started_at=started_at,
        ended_at=now_iso(),
        command=command,
        failure=failure,
    )
    if node == 0:
        manifest.write(run_dir)
    return manifest


def main(argv: list[str] | None = None) -> int:
    """One node's share of a cluster scale point (what `--emit slurm` scripts call)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="holds run_spec.json")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds")
    parser.add_argument("rendezvous", nargs=argparse.REMAINDER, help="-- then torchrun's node flags")
    args = parser.parse_args(argv)
    rendezvous = [a for a in args.rendezvous if a != "--"] or None
    spec = RunSpec.read(args.run_dir / SPEC_NAME)
    manifest = run_point(
        spec,
        args.run_dir.parent,
        timeout_s=args.timeout,
        rendezvous=rendezvous,
        node=int(os.environ.get("SLURM_NODEID", "0")),
    )
    return 0 if manifest.status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
