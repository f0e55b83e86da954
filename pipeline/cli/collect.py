"""`tracehouse collect`: profile the reference workload, one scale point from flags or a TOML sweep."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from tracehouse.collectors.model_sizes import MODELS
from tracehouse.collectors.spec import DEFAULT_TIMEOUT_S, STRATEGIES, ProfilingConfig, RunSpec
from tracehouse.pipeline.cli.options import add_json_option, add_out_option
from tracehouse.pipeline.common.errors import TracehouseError

POINT_FLAGS = ("model", "strategy", "world_size")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `collect` subcommand."""
    p = sub.add_parser(
        "collect",
        help="profile the reference workload (one scale point or a sweep)",
        description="Run the reference Llama-2 workload under torchrun with the profiler on: one scale "
        "point from flags, or every point of a TOML sweep. Writes OUT/<run_id>/ with one trace per rank, "
        "train.log, loss.jsonl, power logs and manifest.json.",
    )
    p.add_argument("sweep", nargs="?", type=Path, help="a sweep file (TOML); omit to give one point by flags")
    add_out_option(p, metavar="DIR", help="output directory (one folder per run)")
    p.add_argument("--emit", choices=["slurm"], help="write sbatch scripts instead of launching")
    p.add_argument("--model", choices=sorted(MODELS), help="named model size")
    p.add_argument("--strategy", choices=STRATEGIES, help="parallel layout")
    p.add_argument("--world-size", type=int, help="number of ranks")
    p.add_argument("--steps", type=int, default=6, help="training steps (default 6)")
    p.add_argument("--global-batch", type=int, default=8, help="sequences per step, all ranks (default 8)")
    p.add_argument("--seq-len", type=int, default=64, help="tokens per sequence (default 64)")
    p.add_argument("--tp", type=int, help="tensor-parallel degree (fsdp_tp; default 2)")
    p.add_argument(
        "--active", type=int, default=3, help="profiled steps (default 3, after 1 wait + 1 warmup)"
    )
    p.add_argument(
        "--profile-memory",
        action="store_true",
        help="also record allocations ([memory] events; every scale point, the sweep file's too)",
    )
    p.add_argument("--study", help="study name (default: the model name)")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="seconds per scale point (an emitted sbatch job gets this plus [slurm] time_margin_s)",
    )
    add_json_option(p, "every scale point's run id, status and folder")
    p.set_defaults(handler=handle)


def point_from_flags(args: argparse.Namespace) -> RunSpec:
    """The one scale point the flags describe."""
    missing = [f"--{name.replace('_', '-')}" for name in POINT_FLAGS if getattr(args, name) is None]
    if missing:
        raise TracehouseError(f"give a sweep file, or {', '.join(missing)}")
    try:
        return RunSpec(
            study=args.study or args.model,
            model=args.model,
            strategy=args.strategy,
            world_size=args.world_size,
            steps=args.steps,
            global_batch=args.global_batch,
            seq_len=args.seq_len,
            tp=args.tp,
            profile=ProfilingConfig(active=args.active, profile_memory=args.profile_memory),
        )
    except ValueError as exc:
        raise TracehouseError(f"invalid scale point: {exc}") from exc


def with_memory(spec: RunSpec) -> RunSpec:
    """The point with profile_memory on (`--profile-memory` over a sweep file)."""
    return dataclasses.replace(spec, profile=dataclasses.replace(spec.profile, profile_memory=True))


def handle(args: argparse.Namespace) -> int:
    """Validate every point, then emit scripts or run them; 1 when any point failed."""
    from tracehouse.collectors.sweep import SweepFileError, load_sweep, run_sweep  # when it runs

    if args.sweep is not None:
        if any(getattr(args, name) is not None for name in POINT_FLAGS):
            raise TracehouseError("give either a sweep file or --model/--strategy/--world-size, not both")
        if not args.sweep.is_file():
            raise SweepFileError(args.sweep, "no such sweep file")
        specs = (
            [with_memory(spec) for spec in load_sweep(args.sweep)]
            if args.profile_memory
            else load_sweep(args.sweep)
        )
    else:
        specs = [point_from_flags(args)]
    if args.emit == "slurm":
        from tracehouse.collectors.slurm import SlurmConfig, emit_slurm
        from tracehouse.collectors.sweep import load_slurm_config

        config = load_slurm_config(args.sweep) if args.sweep is not None else SlurmConfig()
        for script in emit_slurm(specs, args.out, config, timeout_s=args.timeout):
            print(script)
        return 0
    manifests = run_sweep(specs, args.out, timeout_s=args.timeout)
    failed = [m.run_id for m in manifests if m.status != "ok"]
    if args.json:
        points = [
            {"run_id": m.run_id, "status": m.status, "failure": m.failure, "dir": str(args.out / m.run_id)}
            for m in manifests
        ]
        print(json.dumps(points, indent=2))
    print(
        f"{len(manifests) - len(failed)} of {len(manifests)} scale point(s) ok in {args.out}"
        + (f"; failed: {', '.join(failed)}" if failed else ""),
        file=sys.stderr if args.json else sys.stdout,
    )
    return 1 if failed else 0
