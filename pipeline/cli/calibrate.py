"""`tracehouse calibrate`: a real collective sweep under torchrun, written in the nccl-tests layout."""

from __future__ import annotations

import argparse
import json
import sys

from tracehouse.collectors.calibrate.spec import (
    DEFAULT_ITERS,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WARMUP,
    OPS,
    CalibrationSpec,
    default_spec,
)
from tracehouse.collectors.slurm import DEFAULT_TIME_MARGIN_S
from tracehouse.pipeline.cli.options import add_json_option, add_out_option
from tracehouse.pipeline.common.errors import TracehouseError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `calibrate` subcommand."""
    p = sub.add_parser(
        "calibrate",
        help="measure the collectives under torchrun, written as nccl-tests output",
        description="Run all_reduce, all_gather, reduce_scatter, alltoall, broadcast and sendrecv under a "
        "real torchrun (gloo on CPU, NCCL on GPUs) over sizes doubling from --min-bytes to --max-bytes, and "
        "write one file per op into OUT in the nccl-tests layout (all_reduce_perf.txt, ...), which "
        "`tracehouse ingest OUT` reads like real nccl-tests output, plus calibration.json.",
    )
    p.add_argument("--world-size", type=int, required=True, metavar="N", help="number of ranks")
    add_out_option(p, metavar="DIR", help="output directory")
    add_json_option(p, "what was written")
    p.add_argument(
        "--backend",
        choices=["auto", "gloo", "nccl"],
        default="auto",
        help="process group backend (default auto: nccl when CUDA GPUs are available, else gloo)",
    )
    p.add_argument(
        "--min-bytes", type=int, metavar="B", help="smallest size (default 1024, or 4 bytes per rank)"
    )
    p.add_argument(
        "--max-bytes", type=int, metavar="B", help="largest size (default 4 MiB on gloo, 1 GiB on nccl)"
    )
    p.add_argument(
        "--iters",
        type=int,
        default=DEFAULT_ITERS,
        help=f"timed iterations per size (default {DEFAULT_ITERS})",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=DEFAULT_WARMUP,
        help=f"untimed iterations first (default {DEFAULT_WARMUP})",
    )
    p.add_argument("--ops", metavar="LIST", help=f"comma-separated subset of {','.join(OPS)} (default all)")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds for the whole sweep (default {DEFAULT_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=1,
        metavar="N",
        help="spread the ranks over N nodes (world size / N each); more than 1 needs --emit slurm, or "
        "python -m tracehouse.collectors.calibrate.cluster on every node",
    )
    p.add_argument("--emit", choices=["slurm"], help="write OUT/calibrate.sbatch instead of running")
    p.add_argument(
        "--time-margin",
        type=int,
        default=DEFAULT_TIME_MARGIN_S,
        metavar="S",
        help="with --emit slurm: the job's time limit is --timeout plus S seconds, so the launcher "
        f"stops a hung torchrun before SLURM kills the job (default {DEFAULT_TIME_MARGIN_S})",
    )
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Build the sweep from the flags, run it, print one line per op and where the files are."""
    from tracehouse.collectors.calibrate.launch import resolve_backend, run_calibration  # when it runs

    ops = tuple(op.strip() for op in args.ops.split(",") if op.strip()) if args.ops else tuple(OPS)
    # an emitted job runs on GPU nodes (it asks SLURM for them): auto means NCCL there
    backend = "nccl" if args.emit and args.backend == "auto" else resolve_backend(args.backend)
    try:
        spec = default_spec(
            world_size=args.world_size,
            backend=backend,
            min_bytes=args.min_bytes,
            max_bytes=args.max_bytes,
            iters=args.iters,
            warmup=args.warmup,
            ops=ops,
            timeout_s=args.timeout,
            nodes=args.nodes,
        )
    except ValueError as exc:
        raise TracehouseError(f"invalid calibration: {exc}") from exc
    if args.emit == "slurm":
        return emit(spec, args)
    if spec.nodes > 1:
        raise TracehouseError(
            f"a sweep over {spec.nodes} nodes runs one launcher per node: use --emit slurm, or "
            "python -m tracehouse.collectors.calibrate.cluster on every node (docs/collectors.md)"
        )
    human = sys.stderr if args.json else sys.stdout
    print(
        f"calibrating {', '.join(spec.ops)} on {spec.backend} at world size {spec.world_size}, "
        f"{len(spec.sizes())} sizes {spec.min_bytes}..{spec.max_bytes} B",
        flush=True,
        file=human,
    )
    report = run_calibration(spec, args.out, on_progress=lambda line: print(line, flush=True, file=human))
    skipped = f"; skipped {', '.join(report.skipped)} (why: calibration.json)" if report.skipped else ""
    if args.json:
        files = [str(f) for f in report.files]
        print(
            json.dumps(
                {"out": str(report.out_dir), "files": files, "skipped": list(report.skipped)}, indent=2
            )
        )
    print(
        f"wrote {len(report.files)} nccl-tests file(s) and calibration.json to {report.out_dir} "
        f"in {report.wall_s:.1f} s{skipped}",
        file=human,
    )
    return 0


def emit(spec: CalibrationSpec, args: argparse.Namespace) -> int:
    """Write the sweep and its sbatch script into OUT; print the script's path."""
    from tracehouse.collectors.calibrate.cluster import emit_slurm
    from tracehouse.collectors.slurm import SlurmConfig

    try:
        config = SlurmConfig(time_margin_s=args.time_margin)
    except ValueError as exc:
        raise TracehouseError(f"invalid --time-margin: {exc}") from exc
    print(emit_slurm(spec, args.out, config))
    return 0
