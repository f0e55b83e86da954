"""The options that choose what to ingest and how, declared once for `ingest` and `analyze`."""

from __future__ import annotations

import argparse
from typing import Any

from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.discovery.ranks import parse_rank_options


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
