"""`tracehouse report` and `tracehouse analyze`: placeholders."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `report` and `analyze` subcommands."""
    for name in ("report", "analyze"):
        p = sub.add_parser(name, help=f"{name} (not yet built)")
        p.set_defaults(handler=lambda args: 1)
