"""`tracehouse report` (a warehouse to one HTML file) and `tracehouse analyze` (ingest, then report)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracehouse.pipeline.errors import TracehouseError

if TYPE_CHECKING:  # altair takes seconds to import: only the report commands pay for it
    from tracehouse.reports.build import ReportResult


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `report` and `analyze` subcommands."""
    report = sub.add_parser(
        "report",
        help="write a study's self-contained HTML report from a warehouse",
        description="Write one self-contained HTML file (works offline) for one study of a warehouse.",
    )
    report.add_argument("--warehouse", required=True, type=Path, help="warehouse directory")
    _output_options(report)
    report.set_defaults(handler=run_report)

    analyze = sub.add_parser(
        "analyze",
        help="ingest traces into a fresh (or given) warehouse, then write the report",
        description="Ingest trace files or folders, then write the HTML report of the study.",
    )
    analyze.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="trace files or run folders")
    analyze.add_argument("--warehouse", type=Path, help="warehouse directory (default: a temporary one)")
    analyze.add_argument("--run", help="run id for traces that have no manifest")
    analyze.add_argument("--scheduler", help="address of an existing Dask scheduler")
    _output_options(analyze)
    analyze.set_defaults(handler=run_analyze)


def _output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--study", help="study to report (needed when the warehouse has several)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="HTML file to write")
    parser.add_argument("--png", type=Path, metavar="DIR", help="also write every chart as PNG into DIR")


def _print_result(result: ReportResult) -> None:
    print(f"wrote {result.html} ({result.charts} charts, study {result.study!r})")
    for png in result.pngs:
        print(f"wrote {png}")


def run_report(args: argparse.Namespace) -> int:
    """Handler of `tracehouse report`."""
    from tracehouse.reports.build import build_report

    _print_result(build_report(args.warehouse, args.output, study=args.study, png_dir=args.png))
    return 0


def run_analyze(args: argparse.Namespace) -> int:
    """Handler of `tracehouse analyze`: exit 1 when some file failed to load (the report lists it)."""
    from tracehouse.pipeline.ingest import ingest  # Dask loads only for this command

    if args.warehouse is not None:
        return _analyze_into(args, args.warehouse, ingest)
    with tempfile.TemporaryDirectory(prefix="tracehouse-warehouse-") as scratch:
        return _analyze_into(args, Path(scratch), ingest)


def _analyze_into(args: argparse.Namespace, warehouse: Path, ingest: Callable[..., Any]) -> int:
    from tracehouse.reports.build import build_report

    summary = ingest(args.paths, warehouse, study=args.study, run=args.run, scheduler=args.scheduler)
    for path, reason in summary.failed:
        print(f"tracehouse analyze: could not load {path}: {reason}", file=sys.stderr)
    if summary.loaded + summary.skipped == 0:
        raise TracehouseError("no trace was loaded, so there is nothing to report")
    _print_result(build_report(warehouse, args.output, study=args.study, png_dir=args.png))
    return summary.exit_code
