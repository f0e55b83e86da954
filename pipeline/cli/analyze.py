"""`tracehouse analyze PATH... -o report.html`: ingest into the warehouse (as `ingest`), then report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tracehouse.pipeline.cli.options import add_ingest_options, add_warehouse_option, ingest_choices
from tracehouse.pipeline.cli.report import add_output_options, print_result, result_dict
from tracehouse.pipeline.common.errors import TracehouseError


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `analyze` subcommand."""
    analyze = sub.add_parser(
        "analyze",
        help="ingest traces into the warehouse, then write the report",
        description="Ingest trace files or folders exactly as `tracehouse ingest` does (same options, the "
        "same warehouse), then write the HTML report of the study (--study chooses it when the warehouse "
        "has several). "
        "Exit status 1 when any file failed to load.",
    )
    add_ingest_options(analyze)
    add_warehouse_option(analyze, creates=True)
    add_output_options(analyze)
    analyze.set_defaults(handler=run_analyze)


def run_analyze(args: argparse.Namespace) -> int:
    """Handler of `tracehouse analyze`: exit 1 when some file failed to load (the report lists it)."""
    choices = ingest_choices(args)  # a bad --rank fails before any work
    return _analyze_into(args, args.warehouse, choices)


def _analyze_into(args: argparse.Namespace, warehouse: Path, choices: dict[str, Any]) -> int:
    from tracehouse.pipeline.ingest.driver import ingest  # Dask loads only for the commands that ingest
    from tracehouse.reports.build import build_report

    summary = ingest(args.paths, warehouse, **choices)
    for path, reason in summary.failed:
        print(f"tracehouse analyze: could not load {path}: {reason}", file=sys.stderr)
    for line in summary.notice_lines("tracehouse analyze"):
        print(line, file=sys.stderr)
    if summary.loaded + summary.skipped == 0:
        raise TracehouseError("no trace was loaded, so there is nothing to report")
    compare = tuple(args.compare) if args.compare else None
    result = build_report(warehouse, args.out, study=args.study, png_dir=args.png, compare=compare)
    if args.json:
        print(json.dumps({"ingest": summary.to_dict(), "report": result_dict(result)}, indent=2))
    print_result(result, stream=sys.stderr if args.json else sys.stdout)
    return summary.exit_code
