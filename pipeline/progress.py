"""Ingest progress on stderr: a per-file bar on a terminal, plain log lines otherwise.

Failures are always one line each (`error: PATH: reason`), whichever style is in use.
"""

from __future__ import annotations

import sys
from typing import Protocol, TextIO

BAR_WIDTH = 30


class Progress(Protocol):
    """What ingest reports while it works."""

    def start(self, total: int) -> None:
        """Announce how many files will be processed."""

    def file_read(self, path: str) -> None:
        """A task is back with one file (its outcome may wait until its run's rank claims settle)."""

    def file_done(self, path: str, status: str, detail: str) -> None:
        """One file finished: status is loaded, repaired, skipped or failed; detail is one line."""

    def finish(self) -> None:
        """All files are done."""


class Silent:
    """Reports nothing (library use)."""

    def start(self, total: int) -> None:
        """Nothing."""

    def file_read(self, path: str) -> None:
        """Nothing."""

    def file_done(self, path: str, status: str, detail: str) -> None:
        """Nothing."""

    def finish(self) -> None:
        """Nothing."""


class LineProgress:
    """One log line per file, for logs and pipes."""

    def __init__(self, stream: TextIO, prefix: str = "tracehouse ingest") -> None:
        self.stream, self.prefix, self.total, self.done = stream, prefix, 0, 0

    def start(self, total: int) -> None:
        """Say how many files there are."""
        self.total = total
        print(f"{self.prefix}: {total} file(s) to ingest", file=self.stream, flush=True)

    def file_read(self, path: str) -> None:
        """Nothing: a log gets one line per outcome."""

    def file_done(self, path: str, status: str, detail: str) -> None:
        """Print the file's outcome."""
        self.done += 1
        if status == "failed":
            print(f"{self.prefix}: error: {path}: {detail}", file=self.stream, flush=True)
        else:
            print(
                f"{self.prefix}: [{self.done}/{self.total}] {status} {path} ({detail})",
                file=self.stream,
                flush=True,
            )

    def finish(self) -> None:
        """Nothing more to say: the caller prints the summary."""


class BarProgress:
    """A bar redrawn in place on a terminal; errors are printed above it."""

    def __init__(self, stream: TextIO, prefix: str = "tracehouse ingest") -> None:
        self.stream, self.prefix, self.total, self.done = stream, prefix, 0, 0
        self.waiting: set[str] = set()  # read, outcome not yet reported

    def start(self, total: int) -> None:
        """Draw the empty bar."""
        self.total = total
        self._draw("")

    def file_read(self, path: str) -> None:
        """Advance the bar by one file: the bar follows the work, not the rank claims."""
        self.waiting.add(path)
        self._draw(path.rsplit("/", 1)[-1])

    def file_done(self, path: str, status: str, detail: str) -> None:
        """Count the file done (the bar moves unless it already moved when the file was read)."""
        self.waiting.discard(path)
        self.done += 1
        if status == "failed":
            self.stream.write("\r\x1b[2K")
            print(f"{self.prefix}: error: {path}: {detail}", file=self.stream)
        self._draw(path.rsplit("/", 1)[-1])

    def finish(self) -> None:
        """End the bar's line."""
        self.stream.write("\n")
        self.stream.flush()

    def _draw(self, name: str) -> None:
        count = self.done + len(self.waiting)
        filled = BAR_WIDTH * count // max(self.total, 1)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        self.stream.write(f"\r\x1b[2K{self.prefix} [{bar}] {count}/{self.total} {name[:40]}")
        self.stream.flush()


def make_progress(kind: str | Progress | None = "auto", stream: TextIO | None = None) -> Progress:
    """A reporter: "auto" (bar on a terminal, lines otherwise), "bar", "lines", "off"/None, or one given."""
    if kind is None or kind == "off":
        return Silent()
    if not isinstance(kind, str):
        return kind
    stream = stream if stream is not None else sys.stderr
    if kind == "bar" or (kind == "auto" and stream.isatty()):
        return BarProgress(stream)
    if kind in ("lines", "auto"):
        return LineProgress(stream)
    raise ValueError(f"unknown progress kind {kind!r}")
