"""`tracehouse query "SQL" --warehouse DIR`: run read-only SQL and print table, csv or json."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import decimal
import json
import math
import sys
from pathlib import Path
from typing import Any

from tracehouse.pipeline.cli.options import add_warehouse_option


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `query` subcommand."""
    p = sub.add_parser(
        "query",
        help="run SQL on a warehouse",
        description="Run read-only SQL on a warehouse (opened read-only; statements that write are refused).",
    )
    p.add_argument("sql", metavar="SQL", help='the query, e.g. "select * from step_breakdown limit 5"')
    add_warehouse_option(p)
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format")
    p.add_argument(
        "--json", dest="format", action="store_const", const="json", help="the same as --format json"
    )
    p.add_argument(
        "--allow-files",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="also let the SQL read files under DIR (repeatable; DuckDB then lets it write there too). "
        "Without it a query reads the warehouse and nothing else",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the query and print its rows."""
    from tracehouse.pipeline.warehouse.reading import query  # the warehouse loads only when it runs

    columns, rows = query(args.warehouse, args.sql, allow=args.allow_files)
    {"table": print_table, "csv": print_csv, "json": print_json}[args.format](columns, rows)
    return 0


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or infinity
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)  # UUID and other types JSON cannot hold


def print_json(columns: list[str], rows: list[tuple]) -> None:
    """An array of row objects."""
    objects = [{c: _plain(v) for c, v in zip(columns, row, strict=True)} for row in rows]
    print(json.dumps(objects, indent=1, allow_nan=False))


def print_csv(columns: list[str], rows: list[tuple]) -> None:
    """A header line, then one line per row."""
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_text(v) for v in row] for row in rows)


def _text(value: Any) -> str:
    if value is None:
        return ""
    plain = _plain(value)
    return json.dumps(plain) if isinstance(plain, (dict, list)) else str(plain)


def _is_numeric(values: list[Any]) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, (int, float, decimal.Decimal)) for v in present)


def print_table(columns: list[str], rows: list[tuple]) -> None:
    """Aligned text: numbers right-aligned, NULL shown as NULL."""
    cells = [[("NULL" if v is None else _text(v)) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [_is_numeric([r[i] for r in rows]) for i in range(len(columns))]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric, strict=True)
        ).rstrip()

    print(line(columns))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print(line(row))
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
