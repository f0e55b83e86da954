"""A trace task that kills its worker process on one file (the process pool must fail that file alone)."""

from __future__ import annotations

import os

from tracehouse.pipeline.ingest.tasks import FileOutcome, load_trace

DYING_NAME = "dies.json"


def load_or_die(job, warehouse_dir: str, registered: frozenset[str]) -> FileOutcome:
    """load_trace, except that a file named DYING_NAME ends the process at once (as a crash would)."""
    if job.path.name == DYING_NAME:
        os._exit(70)
    return load_trace(job, warehouse_dir, registered)
