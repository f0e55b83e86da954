"""`tracehouse ingest PATH... --warehouse DIR`: load traces (and their runs' power logs) into a warehouse."""

from __future__ import annotations

import argparse
import json
import sys

from tracehouse.pipeline.discovery_ranks import parse_rank_options
from tracehouse.pipeline.errors import TracehouseError
from tracehouse.pipeline.ingest import ingest


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `ingest` subcommand."""
    p = sub.add_parser(
        "ingest",
        help="ingest traces into a warehouse",
        description="Ingest Kineto rank traces (files or directories, searched recursively for *.json and "
        "*.json.gz) and the power logs their manifest.json lists into a DuckDB/Parquet warehouse. "
        "Files already ingested (same content hash) are skipped. Exit status 1 when any file failed.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="trace files or directories")
    p.add_argument(
        "--warehouse", required=True, metavar="DIR", help="warehouse directory (created if absent)"
    )
    p.add_argument("--study", help="study of traces without a manifest.json (default: 'default')")
    p.add_argument("--run", help="run id of traces without a manifest.json (default: their directory's name)")
    p.add_argument(
        "--rank",
        action="append",
        default=[],
        metavar="FILE=N",
        help="rank of a trace that has no distributedInfo.rank and no manifest entry (repeatable)",
    )
    p.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary on stdout")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Ingest, print the summary, and return 1 when any file failed."""
    try:
        ranks = parse_rank_options(args.rank)
    except ValueError as exc:
        raise TracehouseError(str(exc)) from exc
    summary = ingest(
        args.paths,
        args.warehouse,
        study=args.study,
        run=args.run,
        ranks=ranks,
        scheduler=args.scheduler,
        progress="auto",
    )
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
