"""Preloaded by the local pool's server process (`engine.WORKER_PRELOAD`): its exit rule.

When the driver goes, the server sees its end and leaves: without this it would first unload
Polars, Arrow and Dask (about 0.1 s), all the while holding the driver's stdout and stderr, so
that a pipe reading the command's output (`tracehouse ingest ... | tee`, a test, a benchmark)
stayed open that much longer. Its workers exit on their own path (`os._exit` after each run).
Imported anywhere else (a documentation tool, a test), it does nothing.
"""

from __future__ import annotations

import atexit
import os
import sys


def imported_by_the_forkserver() -> bool:
    """Whether this import runs inside the forkserver's main loop (its preload), and so in the server."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_globals.get("__name__") == "multiprocessing.forkserver" and frame.f_code.co_name == "main":
            return True
        frame = frame.f_back
    return False


if imported_by_the_forkserver():
    atexit.register(os._exit, 0)
