"""`tracehouse ingest PATH... --warehouse DIR`: load traces (and their runs' power logs) into a warehouse.

`add_ingest_options` and `ingest_choices` are shared with `tracehouse analyze`, so both commands
accept the same ways of choosing what to ingest.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tracehouse.pipeline.discovery_ranks import parse_rank_options
from tracehouse.pipeline.errors import TracehouseError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `ingest` subcommand."""
    p = sub.add_parser(
        "ingest",
        help="ingest traces into a warehouse",
        description="Ingest Kineto rank traces (files or directories, searched recursively for *.json and "
        "*.json.gz) and the power logs their manifest.json lists into a DuckDB/Parquet warehouse. "
        "Files already ingested (same content hash) are skipped. Exit status 1 when any file failed.",
    )
    add_ingest_options(p)
    p.add_argument(
        "--warehouse", required=True, metavar="DIR", help="warehouse directory (created if absent)"
    )
    p.set_defaults(handler=run)


def add_ingest_options(parser: argparse.ArgumentParser) -> None:
    """The paths and options that choose what to ingest and how (shared by `ingest` and `analyze`)."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="trace files or directories")
    parser.add_argument("--study", help="study of traces without a manifest.json (default: 'default')")
    parser.add_argument(
        "--run", help="run id of traces without a manifest.json (default: their directory's name)"
    )
    parser.add_argument(
        "--rank",
        action="append",
        default=[],
        metavar="FILE=N",
        help="rank of a trace that has no distributedInfo.rank and no manifest entry (repeatable)",
    )
    parser.add_argument(
        "--scheduler", metavar="ADDRESS", help="an existing Dask scheduler, e.g. tcp://host:8786"
    )
    parser.add_argument("--json", action="store_true", help="print a machine-readable summary on stdout")


def ingest_choices(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of `ingest()` that the shared options set."""
    try:
        ranks = parse_rank_options(args.rank)
    except ValueError as exc:
        raise TracehouseError(str(exc)) from exc
    return {"study": args.study, "run": args.run, "ranks": ranks, "scheduler": args.scheduler}


def run(args: argparse.Namespace) -> int:
    """Ingest, print the summary, and return 1 when any file failed."""
    from tracehouse.pipeline.ingest import ingest  # Dask loads only for the commands that ingest

    summary = ingest(args.paths, args.warehouse, **ingest_choices(args), progress="auto")
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
    s = summary
    print(
        f"tracehouse ingest: {s.loaded} loaded, {s.skipped} skipped, {len(s.failed)} failed, "
        f"{s.events} events, "
        f"{s.power_files} power logs in {s.seconds:.1f} s -> {s.warehouse}",
        file=sys.stderr,
    )
    return summary.exit_code
