"""`tracehouse export-trace RUN --step N -o merged.json`: the chosen steps of a run as one Perfetto trace."""

from __future__ import annotations

import argparse
import json
import sys

from tracehouse.pipeline.cli.options import add_json_option, add_out_option, add_warehouse_option


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `export-trace` subcommand."""
    p = sub.add_parser(
        "export-trace",
        help="write chosen steps of a run, all ranks, as one Perfetto/Chrome trace JSON",
        description="Write one Chrome trace JSON (open it in ui.perfetto.dev) holding every rank of a run "
        "for the chosen steps: a process per rank, its events shifted by its host's clock offset "
        "(clock_offsets), and overlay tracks for exposed communication (comm_exposure), idle "
        "causes (idle_causes) and the critical path (critical_path, stored by tracehouse project). "
        "A run is RUN, or STUDY/RUN when run ids repeat across studies.",
    )
    p.add_argument("run", metavar="RUN", help="the run")
    p.add_argument(
        "--step", type=int, action="append", required=True, metavar="N", help="a step to export (repeatable)"
    )
    p.add_argument("--study", help="study of the run, when its id repeats across studies")
    add_warehouse_option(p)
    add_out_option(p, metavar="FILE", help="the trace JSON to write")
    add_json_option(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Export and say what was written."""
    from tracehouse.pipeline.export_trace import export_trace  # the warehouse loads only when it runs
    from tracehouse.pipeline.warehouse.reading import open_reader

    with open_reader(args.warehouse) as connection:
        result = export_trace(connection, args.run, args.step, args.out, study=args.study)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    steps = ", ".join(map(str, result.steps))
    print(
        f"wrote {result.path}: {result.run} step {steps}, {len(result.ranks)} ranks, {result.events} events, "
        f"{result.exposed_comm} exposed-communication, {result.idle_windows} idle and "
        f"{result.critical_segments} critical-path spans",
        file=sys.stderr if args.json else sys.stdout,
    )
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0
