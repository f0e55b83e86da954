"""`tracehouse report --warehouse DIR -o report.html`: one study of a warehouse as one HTML file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # altair takes seconds to import: only the report commands pay for it
    from tracehouse.reports.build import ReportResult


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `report` subcommand."""
    report = sub.add_parser(
        "report",
        help="write a study's self-contained HTML report from a warehouse",
        description="Write one self-contained HTML file (works offline) for one study of a warehouse.",
    )
    report.add_argument("--warehouse", required=True, type=Path, metavar="DIR", help="warehouse directory")
    report.add_argument("--study", help="study to report (needed when the warehouse has several)")
    add_output_options(report)
    report.set_defaults(handler=run_report)


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """The options of the HTML output (shared by `report` and `analyze`)."""
    parser.add_argument("-o", "--output", required=True, type=Path, help="HTML file to write")
    parser.add_argument("--png", type=Path, metavar="DIR", help="also write every chart as PNG into DIR")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="add a section on what changed from RUN_A to RUN_B (each RUN or STUDY/RUN)",
    )


def print_result(result: ReportResult, *, stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout  # looked up now: tests and callers may have replaced it
    print(f"wrote {result.html} ({result.charts} charts, study {result.study!r})", file=stream)
    for png in result.pngs:
        print(f"wrote {png}", file=stream)


def run_report(args: argparse.Namespace) -> int:
    """Handler of `tracehouse report`."""
    from tracehouse.reports.build import build_report

    compare = tuple(args.compare) if args.compare else None
    print_result(
        build_report(args.warehouse, args.output, study=args.study, png_dir=args.png, compare=compare)
    )
    return 0
