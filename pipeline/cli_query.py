"""`tracehouse query`: placeholder."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `query` subcommand."""
    p = sub.add_parser("query", help="run SQL on a warehouse")
    p.set_defaults(handler=lambda args: 1)
