"""`tracehouse collect`: placeholder until the collectors land."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `collect` subcommand."""
    p = sub.add_parser("collect", help="profile the reference workload (one scale point or a sweep)")
    p.set_defaults(handler=lambda args: 1)
