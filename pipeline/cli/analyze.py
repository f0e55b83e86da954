"""`tracehouse analyze PATH... -o report.html`: ingest into a fresh (or given) warehouse, then report."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracehouse.pipeline.cli.options import add_ingest_options, ingest_choices
from tracehouse.pipeline.cli.report import add_output_options, print_result
from tracehouse.pipeline.common.errors import TracehouseError

if TYPE_CHECKING:  # altair takes seconds to import: only the report commands pay for it
    from tracehouse.reports.build import ReportResult


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `analyze` subcommand."""
    analyze = sub.add_parser(
        "analyze",
        help="ingest traces into a fresh (or given) warehouse, then write the report",
        description="Ingest trace files or folders exactly as `tracehouse ingest` does (same options), "
        "then write the HTML report of the study (--study chooses it when the warehouse has several). "
        "Exit status 1 when any file failed to load.",
    )
    add_ingest_options(analyze)
    analyze.add_argument(
        "--warehouse", type=Path, metavar="DIR", help="warehouse directory (default: a temporary one)"
    )
    add_output_options(analyze)
    analyze.set_defaults(handler=run_analyze)


def run_analyze(args: argparse.Namespace) -> int:
    """Handler of `tracehouse analyze`: exit 1 when some file failed to load (the report lists it)."""
    choices = ingest_choices(args)  # a bad --rank fails before any work
    if args.warehouse is not None:
        return _analyze_into(args, args.warehouse, choices)
    with tempfile.TemporaryDirectory(prefix="tracehouse-warehouse-") as scratch:
        return _analyze_into(args, Path(scratch), choices)


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
    result = build_report(warehouse, args.output, study=args.study, png_dir=args.png, compare=compare)
    if args.json:
        print(json.dumps({"ingest": summary.to_dict(), "report": _result_dict(result)}, indent=2))
    print_result(result, stream=sys.stderr if args.json else sys.stdout)
    return summary.exit_code


def _result_dict(result: ReportResult) -> dict[str, Any]:
    return {
        "html": str(result.html),
        "study": result.study,
        "charts": result.charts,
        "pngs": [str(p) for p in result.pngs],
    }
