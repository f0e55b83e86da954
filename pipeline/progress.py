"""Ingest progress: a per-file bar on a terminal, one updating line in a notebook, log lines otherwise.

Failures are always one line each (`error: PATH: reason`), whichever style is in use.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol, TextIO

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
            self._error(f"{self.prefix}: error: {path}: {detail}")
        self._draw(path.rsplit("/", 1)[-1])

    def finish(self) -> None:
        """End the bar's line."""
        self.stream.write("\n")
        self.stream.flush()

    def _error(self, line: str) -> None:
        """Print a failure above the bar (the bar is redrawn below it next)."""
        self.stream.write("\r\x1b[2K")
        print(line, file=self.stream)

    def _draw(self, name: str) -> None:
        self.stream.write(f"\r\x1b[2K{self._bar(name)}")
        self.stream.flush()

    def _bar(self, name: str) -> str:
        count = self.done + len(self.waiting)
        filled = BAR_WIDTH * count // max(self.total, 1)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        return f"{self.prefix} [{bar}] {count}/{self.total} {name[:40]}"


class NotebookProgress(BarProgress):
    """The bar as one output line of a notebook cell, updated in place (an IPython display handle).

    A kernel's stderr shows no terminal control codes; errors go there, one line each, below it.
    """

    def __init__(self, stream: TextIO, prefix: str = "tracehouse ingest") -> None:
        super().__init__(stream, prefix)
        self.handle: Any = None

    def finish(self) -> None:
        """Nothing: the line stays as last drawn."""

    def _error(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def _draw(self, name: str) -> None:
        from IPython.display import display

        bundle = {"text/plain": self._bar(name)}
        if self.handle is None:
            self.handle = display(bundle, raw=True, display_id=True)
        else:
            self.handle.update(bundle, raw=True)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel attached)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def make_progress(kind: str | Progress | None = "auto", stream: TextIO | None = None) -> Progress:
    """A reporter: "auto" (a bar on a terminal or in a notebook, lines otherwise), "bar", "lines", "off"/None,
    or one given. In a notebook the bar is one output line updated in place."""
    if kind is None or kind == "off":
        return Silent()
    if not isinstance(kind, str):
        return kind
    stream = stream if stream is not None else sys.stderr
    if kind in ("bar", "auto") and in_notebook():
        return NotebookProgress(stream)
    if kind == "bar" or (kind == "auto" and stream.isatty()):
        return BarProgress(stream)
    if kind in ("lines", "auto"):
        return LineProgress(stream)
    raise ValueError(f"unknown progress kind {kind!r}")
