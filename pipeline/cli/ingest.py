"""`tracehouse ingest PATH... --warehouse DIR`: load traces (and their runs' power logs) into a warehouse.

The options that choose what to ingest are `options.add_ingest_options`, shared with `analyze`.
"""

from __future__ import annotations

import argparse
import json
import sys

from tracehouse.pipeline.cli.options import add_ingest_options, add_warehouse_option, ingest_choices


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
    add_warehouse_option(p, creates=True)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Ingest, print the summary, and return 1 when any file failed."""
    from tracehouse.pipeline.ingest.driver import ingest  # Dask loads only for the commands that ingest

    summary = ingest(args.paths, args.warehouse, **ingest_choices(args), progress="auto")
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2))
    for line in summary.report_lines("tracehouse ingest"):
        print(line, file=sys.stderr)
    return summary.exit_code
