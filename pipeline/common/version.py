"""tracehouse's own version, read from the installed distribution's metadata (standard library only)."""

from __future__ import annotations

from importlib import metadata


def version() -> str:
    """The installed distribution's version; "0+unknown" when run from a tree that was never installed."""
    try:
        return metadata.version("tracehouse")
    except metadata.PackageNotFoundError:
        return "0+unknown"
