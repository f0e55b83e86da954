"""The project's own small exception hierarchy; every message is one line a user can act on."""

from __future__ import annotations

from pathlib import Path

# Set to 1 in the environment to see the traceback of a tracehouse bug instead of its one line.
DEBUG_VARIABLE = "TRACEHOUSE_DEBUG"


def one_line(value: object) -> str:
    """Any text (an exception's message, a reason) as one line: runs of whitespace become one space."""
    return " ".join(str(value).split())


class TracehouseError(Exception):
    """Base of every error tracehouse reports to a user (the CLI prints it as one line)."""


class InputFileError(TracehouseError):
    """A file that cannot be read as what it claims to be."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = one_line(reason)
        super().__init__(f"{self.path}: {self.reason}")


class TraceFormatError(InputFileError):
    """A rank trace that is not a readable Kineto chrome trace."""


class PowerLogError(InputFileError):
    """A power log that none of the power parsers can read."""


class ManifestError(InputFileError):
    """A run manifest that is missing fields or contradicts itself."""


class RankConflictError(TracehouseError):
    """Two files claim the same rank of one run, or a rank cannot be determined."""


class WarehouseError(TracehouseError):
    """The warehouse cannot be opened, or a query was refused."""


class SchedulerError(TracehouseError):
    """The Dask scheduler address given is malformed, or nothing answers there."""
