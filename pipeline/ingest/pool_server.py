"""Imported by the local pool's server process only (`engine.WORKER_PRELOAD`), never by the driver.

When the driver goes, the server sees its end and leaves: without this it would first unload
Polars, Arrow and Dask (about 0.1 s), all the while holding the driver's stdout and stderr, so
that a pipe reading the command's output (`tracehouse ingest ... | tee`, a test, a benchmark)
stayed open that much longer. Its workers exit on their own path (`os._exit` after each run).
"""

from __future__ import annotations

import atexit
import os

atexit.register(os._exit, 0)
