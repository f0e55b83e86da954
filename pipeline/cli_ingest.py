"""`tracehouse ingest`: placeholder."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `ingest` subcommand."""
    p = sub.add_parser("ingest", help="ingest traces into a warehouse")
    p.set_defaults(handler=lambda args: 1)
