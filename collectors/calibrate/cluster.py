"""A calibration sweep over several nodes: one launcher per node, torchrun with a c10d rendezvous.

Each node runs `python -m tracehouse.collectors.calibrate.cluster --out DIR [--node K] --
--nnodes N --nproc_per_node K --rdzv-backend c10d --rdzv-endpoint HEAD:PORT --rdzv-id ID`
(what `tracehouse calibrate --nodes N --emit slurm` writes into DIR/calibrate.sbatch). DIR must
be seen by every node (a shared file system): it holds the sweep (calibrate_spec.json) and rank
0's result. Node 0 writes the nccl-tests files and calibration.json; the other nodes log to
calibrate.node<K>.log and write nothing else.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tracehouse.collectors.calibrate.launch import (
    LOG_NAME,
    RESULT_NAME,
    SPEC_NAME,
    CalibrationError,
    check_machine,
    clear_outputs,
    run_calibration,
    run_streaming,
    torchrun_command,
)
from tracehouse.collectors.calibrate.spec import CalibrationSpec
from tracehouse.collectors.slurm import NodeJob, SlurmConfig, job_script

SCRIPT_NAME = "calibrate.sbatch"


def node_log(node: int) -> str:
    """The log of one node's torchrun (node 0's is calibrate.log)."""
    return LOG_NAME if node == 0 else f"calibrate.node{node}.log"


def run_node(spec: CalibrationSpec, out_dir: Path, rendezvous: list[str], node: int) -> None:
    """One node's share of a multi-node sweep; node 0 also writes the outputs."""
    if node == 0:
        run_calibration(
            spec, out_dir, on_progress=lambda line: print(line, flush=True), rendezvous=rendezvous
        )
        return
    check_machine(spec)
    command = torchrun_command(spec, out_dir / SPEC_NAME, out_dir / RESULT_NAME, rendezvous)
    failure = run_streaming(command, out_dir / node_log(node), spec.timeout_s, lambda line: None)
    if failure:
        raise CalibrationError(failure)


def emit_slurm(spec: CalibrationSpec, out_dir: Path, config: SlurmConfig | None = None) -> Path:
    """Write out_dir/{calibrate_spec.json, calibrate.sbatch} for a multi-node sweep; return the script."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    clear_outputs(out_dir)
    spec.write(out_dir / SPEC_NAME)
    launcher = [sys.executable, "-m", "tracehouse.collectors.calibrate.cluster", "--out", str(out_dir)]
    job = NodeJob(
        name=f"tracehouse-calibrate-{spec.backend}-ws{spec.world_size}",
        nodes=spec.nodes,
        per_node=spec.per_node,
        log=out_dir / "slurm-%j.calibrate.log",
        launcher=[*launcher, "--timeout", f"{spec.timeout_s:g}"],
        timeout_s=spec.timeout_s,
    )
    script = out_dir / SCRIPT_NAME
    script.write_text(job_script(job, config))
    script.chmod(0o755)
    return script


def main(argv: list[str] | None = None) -> int:
    """One node's share of a multi-node sweep (what calibrate.sbatch runs on every node)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, required=True, help="holds calibrate_spec.json; seen by every node"
    )
    parser.add_argument("--node", type=int, help="this node's index (default $SLURM_NODEID, else 0)")
    parser.add_argument("--timeout", type=float, help="seconds for the whole torchrun (default: the spec's)")
    parser.add_argument("rendezvous", nargs=argparse.REMAINDER, help="-- then torchrun's node flags")
    args = parser.parse_args(argv)
    rendezvous = [a for a in args.rendezvous if a != "--"]
    if not rendezvous:
        parser.error("give torchrun's node flags after --: --nnodes N --nproc_per_node K --rdzv-...")
    try:
        spec = CalibrationSpec.read(args.out / SPEC_NAME)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        print(f"{args.out / SPEC_NAME}: cannot read the calibration spec: {exc}", file=sys.stderr)
        return 2
    if args.timeout is not None:
        spec = CalibrationSpec(**{**spec.to_dict(), "ops": spec.ops, "timeout_s": args.timeout})
    node = args.node if args.node is not None else int(os.environ.get("SLURM_NODEID", "0"))
    try:
        run_node(spec, args.out, rendezvous, node)
    except CalibrationError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
