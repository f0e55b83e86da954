"""`tracehouse critical-path`: store each replayed step's critical path across ranks and op slack."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from tracehouse.pipeline.cli.options import add_warehouse_option


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `critical-path` subcommand."""
    p = sub.add_parser(
        "critical-path",
        help="store each step's critical path across ranks and every op's slack (critical_path, op_slack)",
        description="Replay each run's steps with their measured durations and walk back from the end of the "
        "slowest rank's window along the dependencies that set each time: the chain of compute, "
        "transfers, waits for other ranks, host time, launch delays and sync tails that sets the step's "
        "length. Stores it (critical_path) with each op's slack (op_slack), replacing the run's earlier "
        "rows; a run that cannot be replayed is stored with its reason and the command exits 1.",
    )
    add_warehouse_option(p)
    p.add_argument("--study", required=True, metavar="S", help="the study")
    p.add_argument("--run", metavar="R", help="one run (default: every run of the study)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Compute, store, print one line per step."""
    from tracehouse.pipeline.projection.critical_rows import compute_and_store

    def progress(line: str) -> None:
        print(f"tracehouse critical-path: {line}", file=sys.stderr)

    result = compute_and_store(args.warehouse, study=args.study, run_id=args.run, progress=progress)
    for run, paths in result.paths.items():
        for p in paths:
            by_kind: dict[str, float] = defaultdict(float)
            for s in p.segments:
                by_kind[s.kind] += s.dur_ns / 1e3
            ranks = sorted({s.rank for s in p.segments})
            parts = ", ".join(f"{k} {v:.0f}" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]) if v)
            where = f"{p.step_ns / 1e3:.0f} µs on rank {p.rank}; ranks {ranks}"
            print(f"{args.study}/{run} step {p.step}: {where}: {parts}")
    for run, why in result.failed.items():
        print(f"tracehouse critical-path: {args.study}/{run} has no path: {why}", file=sys.stderr)
    return 1 if result.failed else 0
