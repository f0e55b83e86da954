"""The project's own small exception hierarchy; every message is one line a user can act on."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

# Set to 1 in the environment to see the traceback of a tracehouse bug instead of its one line.
DEBUG_VARIABLE = "TRACEHOUSE_DEBUG"


# Faults of the system, not of a file or of tracehouse: the disk, the folder's mode, permissions.
SYSTEM_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG})
_OS_ERROR_CODE = re.compile(r"\(os error (\d+)\)")


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


def system_fault(exc: BaseException | None) -> str | None:
    """The OS's words for a system fault (disk full, read-only, permission) behind an exception, or None.

    Libraries wrap it: an OSError (errno), Polars' and Arrow's "(os error 28)", DuckDB's IO errors
    naming the OS's message. The exception's causes are looked at too.
    """
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in SYSTEM_FAULTS:
            return f"{os.strerror(exc.errno)} (os error {exc.errno})"
        text = str(exc)
        for match in _OS_ERROR_CODE.finditer(text):
            if int(match[1]) in SYSTEM_FAULTS:
                return f"{os.strerror(int(match[1]))} (os error {match[1]})"
        for code in SYSTEM_FAULTS:
            if os.strerror(code) in text:
                return f"{os.strerror(code)} (os error {code})"
        exc = exc.__cause__ or exc.__context__
    return None


class SchedulerError(TracehouseError):
    """The Dask scheduler address given is malformed, or nothing answers there."""
