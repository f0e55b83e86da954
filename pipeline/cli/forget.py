"""`tracehouse forget RUN --warehouse DIR`: remove a run from a warehouse in one transaction."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from tracehouse.pipeline.cli.options import add_json_option, add_warehouse_option


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `forget` subcommand."""
    p = sub.add_parser(
        "forget",
        help="remove a run (its traces, power logs, partitions, projections) from a warehouse",
        description="Remove one run from a warehouse: its catalog rows, projections and materialized rows "
        "in one transaction, then its Parquet files. Ingesting its files again brings it back.",
    )
    p.add_argument("run_id", metavar="RUN", help="the run to remove")
    p.add_argument("--study", help="its study, when the run id is in several")
    add_warehouse_option(p)
    add_json_option(p, "what was removed")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Forget the run and say what went."""
    from tracehouse.pipeline.ingest.forget import forget_run

    forgotten = forget_run(args.warehouse, args.run_id, study=args.study)
    if args.json:
        print(json.dumps(dataclasses.asdict(forgotten), indent=2))
    print(forgotten.line(), file=sys.stderr if args.json else sys.stdout)
    return 0
