"""The `tracehouse` command: a thin layer that parses arguments, calls one library function, prints.

Each subcommand lives in its own small module exposing `register(subparsers)`, which adds
the parser and sets `handler(args) -> int`. Library errors (`TracehouseError`) become one
line on stderr and exit status 2; any other exception is a bug, reported as one line and exit
status 70 (EX_SOFTWARE), with the traceback only when TRACEHOUSE_DEBUG=1. (A bug met while
ingesting one file fails only that file, marked as an internal error: see `ingest.tasks`.)
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tracehouse.pipeline.common.errors import DEBUG_VARIABLE, TracehouseError, one_line

# Modules whose `register` adds one or more subcommands, in the order help lists them.
COMMAND_MODULES = (
    "tracehouse.pipeline.cli.collect",
    "tracehouse.pipeline.cli.ingest",
    "tracehouse.pipeline.cli.query",
    "tracehouse.pipeline.cli.report",
    "tracehouse.pipeline.cli.analyze",
    "tracehouse.pipeline.cli.diff",
    "tracehouse.pipeline.cli.calibrate",
    "tracehouse.pipeline.cli.project",
    "tracehouse.pipeline.cli.check",
    "tracehouse.pipeline.cli.forget",
)
# Exit status of an unexpected exception (a bug), as sysexits.h's EX_SOFTWARE.
INTERNAL_ERROR = 70


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="tracehouse",
        description="Where does each training step's time go as you add GPUs? "
        "Capture traces, ingest them into a DuckDB/Parquet warehouse, query and report.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tracehouse` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except TracehouseError as exc:
        print(f"tracehouse {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as command-line tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print(f"tracehouse {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if os.environ.get(DEBUG_VARIABLE) == "1":
            raise
        print(internal_error_line(exc), file=sys.stderr)
        return INTERNAL_ERROR


def run() -> None:
    """The console script: `main`, then exit without tearing the interpreter down.

    Unloading DuckDB, Polars, Arrow and Dask at exit takes about 0.1 s, all of it after the work
    is done and stored (every connection is closed and every worker joined before `main`
    returns); a one-file query or a small ingest is several times that, so the script flushes its
    output and leaves at once. `main` itself (tests, `python -m`) returns as usual.
    """
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        code = code or 141
    os._exit(code)


def internal_error_line(exc: Exception) -> str:
    """The one line that reports an unexpected exception."""
    message = one_line(exc)
    return (
        f"tracehouse: internal error: {type(exc).__name__}: {message} "
        f"(rerun with {DEBUG_VARIABLE}=1 for the traceback)"
    )


if __name__ == "__main__":
    sys.exit(main())
