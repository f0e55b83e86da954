"""`tracehouse report --warehouse DIR -o report.html`: one study of a warehouse as one HTML file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tracehouse.pipeline.cli.options import add_json_option, add_out_option, add_warehouse_option

if TYPE_CHECKING:  # altair takes seconds to import: only the report commands pay for it
    from tracehouse.reports.build import ReportResult


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `report` subcommand."""
    report = sub.add_parser(
        "report",
        help="write a study's self-contained HTML report from a warehouse",
        description="Write one self-contained HTML file (works offline) for one study of a warehouse.",
    )
    add_warehouse_option(report)
    report.add_argument("--study", help="study to report (needed when the warehouse has several)")
    add_output_options(report)
    add_json_option(report, "what was written")
    report.set_defaults(handler=run_report)


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """The options of the HTML output (shared by `report` and `analyze`)."""
    add_out_option(parser, metavar="FILE", help="HTML file to write")
    parser.add_argument("--png", type=Path, metavar="DIR", help="also write every chart as PNG into DIR")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="add a section on what changed from RUN_A to RUN_B (each RUN or STUDY/RUN)",
    )


def result_dict(result: ReportResult) -> dict[str, Any]:
    """What a report wrote, for --json."""
    return {
        "html": str(result.html),
        "study": result.study,
        "charts": result.charts,
        "pngs": [str(p) for p in result.pngs],
    }


def print_result(result: ReportResult, *, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout  # looked up now: tests and callers may have replaced it
    print(f"wrote {result.html} ({result.charts} charts, study {result.study!r})", file=stream)
    for png in result.pngs:
        print(f"wrote {png}", file=stream)


def run_report(args: argparse.Namespace) -> int:
    """Handler of `tracehouse report`."""
    from tracehouse.reports.build import build_report

    compare = tuple(args.compare) if args.compare else None
    result = build_report(args.warehouse, args.out, study=args.study, png_dir=args.png, compare=compare)
    if args.json:
        print(json.dumps(result_dict(result), indent=2))
    print_result(result, stream=sys.stderr if args.json else sys.stdout)
    return 0
