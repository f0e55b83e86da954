"""Where a local ingest runs its tasks: in-process, on threads, or on a pool of worker processes.

This module imports nothing heavy, so the driver can choose the engine and start the pool's
server before it imports DuckDB, Polars and Dask itself: the server imports the task module
(`WORKER_PRELOAD`) on the other core meanwhile.

The pool is Dask's local process scheduler (`dask.multiprocessing.get`) over a
`ProcessPoolExecutor` whose workers are forked from a forkserver that has already imported the
task module: a worker starts in milliseconds, not the ~1 s of a fresh interpreter, and forks
from a process that holds no threads, DuckDB handle or Polars thread pool (a fork of the
driver would). The workers re-import the driver's `__main__` like any spawned process: a script
that ingests from its top level needs the usual `if __name__ == "__main__":` guard (without it
no worker can start, and the files run on threads with a warning: `runner`).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import stat
from pathlib import Path
from typing import Any

IN_PROCESS, THREADS, PROCESSES = "in-process", "threads", "processes"

# What the pool's server imports before it forks any worker: Dask's task runner, the tasks and the
# trace parser they import when they first run, and the server's own exit rule. Not DuckDB:
# workers never open the catalog (a test keeps it out; 0.06 s of the server's start).
WORKER_PRELOAD = [
    "dask.local",
    "tracehouse.pipeline.ingest.tasks",
    "tracehouse.pipeline.parsers.kineto.parse",
    "tracehouse.pipeline.ingest.pool_server",  # the server's own exit
]

# What the pool adds to an ingest where the driver cannot hide it. The server itself (its imports,
# 0.36-0.48 s on the 2-core dev VM, 2026-12-04, `benchmarks/ingest.py --pool-startup`; a
# LocalCluster of spawned interpreters took 1.1-1.3 s) starts before the driver imports DuckDB,
# Polars and Dask (0.35 s, needed whatever the engine), on the other core, and later ingests of the
# same process reuse it; what is left is forking the workers and their first task's warm-up.
# Measured the same day, first ingest of a fresh process, threads vs pool, 3 runs each: 8 traces
# of 1 MB 1.09-1.14 vs 1.07-1.10 s; 2 of 14 MB 1.12-1.13 vs 1.10 s; the 22 sample traces (5.7 MB)
# 3.22-3.28 vs 3.03 s; 8 of 14 MB 1.62-1.69 vs 1.48-1.56 s.
POOL_STARTUP_S = 0.05
# A task's cost, measured in-process on real traces (hash, decode, Parquet write): 195-240 MB/s
# of uncompressed JSON on traces of 15-87 MB, plus about 0.05 s per file.
TASK_JSON_BYTES_PER_S = 200e6
TASK_FIXED_S = 0.05
# The share of a trace task that holds the GIL (the C scanner's pass, building Python objects),
# so that threads do not overlap it: 8 tasks of 56 MB took 1.55 s one after another and 1.24 s on
# 2 threads (same VM), which 0.6 + 0.4 / 2 = 0.8 of the serial time matches.
THREAD_GIL_SHARE = 0.6
# gzip keeps the uncompressed size mod 2^32 (ISIZE); a trace's JSON is about this many times its
# gzip size (10-29x on the shared and sample traces), which picks the multiple of 2^32 to add back.
TYPICAL_GZIP_RATIO = 16


def json_size(path: Path) -> int:
    """A file's uncompressed size in bytes: a gzip file's ISIZE footer (mod 2^32, restored), else its size.

    0 for what is not a readable regular file (a FIFO would block the open): its task says why.
    """
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return 0
        with path.open("rb") as f:  # a local file or a store's object (`discovery.locations`)
            if info.st_size < 18 or f.read(2) != b"\x1f\x8b":
                return info.st_size
            f.seek(-4, os.SEEK_END)
            return unwrapped_isize(info.st_size, int.from_bytes(f.read(4), "little"))
    except OSError:
        return 0


def unwrapped_isize(gzip_bytes: int, isize: int) -> int:
    """The uncompressed size whose value mod 2^32 is isize, nearest TYPICAL_GZIP_RATIO x the gzip size.

    Never below the gzip size (JSON is never smaller than its gzip).
    """
    wraps = max(0, round((gzip_bytes * TYPICAL_GZIP_RATIO - isize) / 2**32))
    while isize + wraps * 2**32 < gzip_bytes:
        wraps += 1
    return isize + wraps * 2**32


def local_engine(json_sizes: list[int], cores: int | None = None) -> tuple[str, int]:
    """How a local ingest runs its tasks, and on how many workers (see POOL_STARTUP_S).

    One file, or one core: in-process. Else threads or a process pool on every core, whichever
    the estimated work (TASK_JSON_BYTES_PER_S, TASK_FIXED_S) says finishes first; threads where
    the platform has no forkserver.
    """
    workers = min(cores or os.cpu_count() or 1, len(json_sizes))
    if workers < 2:
        return IN_PROCESS, 1
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return THREADS, workers
    work_s = sum(size / TASK_JSON_BYTES_PER_S + TASK_FIXED_S for size in json_sizes)
    threads_s = work_s * (THREAD_GIL_SHARE + (1 - THREAD_GIL_SHARE) / workers)
    processes_s = work_s / workers + POOL_STARTUP_S
    return (PROCESSES if processes_s < threads_s else THREADS), workers


def pool_context() -> Any:
    """The multiprocessing context of the pool's workers: forked from a server that preloads the tasks."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WORKER_PRELOAD)
    return context


def in_worker_start() -> bool:
    """Whether this process is a pool worker still starting (re-running the driver's `__main__`)."""
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def start_pool_server() -> None:
    """Start the pool's server now (it imports the tasks in the background); a no-op once it runs."""
    pool_context()
    multiprocessing.forkserver.ensure_running()
