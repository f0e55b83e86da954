"""`tracehouse check --warehouse DIR`: verify every Parquet partition against the catalog."""

from __future__ import annotations

import argparse
import json
import sys

from tracehouse.pipeline.cli.options import add_json_option, add_warehouse_option


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `check` subcommand."""
    p = sub.add_parser(
        "check",
        help="verify every Parquet partition of a warehouse against its catalog",
        description="Read every registered Parquet partition and compare it with what its worker wrote: "
        "present, same size, same bytes (CRC-32), same row count in its footer. Prints each damaged "
        "partition and the source files whose ingest repairs it. Reads only; exit status 1 when any "
        "partition is damaged.",
    )
    add_warehouse_option(p)
    add_json_option(p, "the damaged partitions")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Check, print what is damaged and how to repair it."""
    from tracehouse.pipeline.ingest.integrity import check_warehouse

    result = check_warehouse(args.warehouse)
    if args.json:
        damaged = [
            {"path": d.path, "table": d.table, "source": d.source, "problem": d.problem}
            for d in result.damaged
        ]
        print(json.dumps({"partitions": result.partitions, "damaged": damaged}, indent=2))
    for damage in result.damaged:
        print(f"tracehouse check: damaged: {damage.line()}", file=sys.stderr)
    if not result.damaged:
        print(f"tracehouse check: {result.partitions} partitions verified, none damaged", file=sys.stderr)
        return 0
    repair = f"tracehouse ingest {' '.join(result.sources)} --warehouse {args.warehouse}"
    print(
        f"tracehouse check: {len(result.damaged)} of {result.partitions} partitions damaged; ingest their "
        f"sources again to repair them: {repair}",
        file=sys.stderr,
    )
    return 1
