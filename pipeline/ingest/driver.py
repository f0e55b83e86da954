"""Ingest: discover files, choose where their tasks run, then load them (one file = one task).

Files are rank traces, the power logs their manifests list, and nccl-tests output files. The
loading (`load`: tasks on Dask, registration, refresh) imports DuckDB, Polars and Dask; this
module imports none of them, so that a local process pool's server (`engine`) starts importing
the tasks on another core before the driver imports them itself. One file's failure, a tracehouse
bug included, fails that file only; a bad `--scheduler` or an unusable warehouse stops the ingest
with one line.

On `--scheduler`, a worker's first task is its slowest (0.2-0.5 s more on the dev VM: imports of
the task module, polars and pyarrow, then their first use); `dask worker ADDRESS --preload
tracehouse.pipeline.ingest.tasks` moves the imports to the worker's start-up. What bounds the
speed-up from more workers, measured on a real scheduler: `benchmarks/ingest.py --cluster`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tracehouse.pipeline.common.errors import SchedulerError, TracehouseError, one_line
from tracehouse.pipeline.common.manifest import check_facts
from tracehouse.pipeline.discovery.search import discover
from tracehouse.pipeline.ingest.engine import (
    IN_PROCESS,
    PROCESSES,
    in_worker_start,
    json_size,
    local_engine,
    start_pool_server,
)
from tracehouse.pipeline.ingest.summary import IngestSummary
from tracehouse.pipeline.progress import Progress, make_progress

__all__ = ["IngestSummary", "SchedulerError", "ingest"]

# How long to wait for `--scheduler` to answer before giving up with one line.
SCHEDULER_TIMEOUT_S = 10
SCHEDULER_ADDRESS = re.compile(r"tcp://(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>[0-9]{1,5})")


def check_scheduler_address(address: str) -> str:
    """The address, if it has the form tcp://HOST:PORT; SchedulerError otherwise."""
    match = SCHEDULER_ADDRESS.fullmatch(address)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise SchedulerError(  # no option name: the same words serve --scheduler and scheduler=
            f"scheduler address {address!r}: expected tcp://HOST:PORT, e.g. tcp://node1:8786"
        )
    return address


@contextmanager
def scheduler_client(address: str | None) -> Iterator[Any]:
    """A Dask client of the scheduler at the address (None: no client), or SchedulerError."""
    if address is None:
        yield None
        return
    check_scheduler_address(address)
    from distributed import Client

    try:
        client = Client(address, timeout=SCHEDULER_TIMEOUT_S)
    except Exception as exc:  # refused, unknown host, timed out, not a scheduler: all one line
        reason = one_line(exc) or type(exc).__name__
        raise SchedulerError(f"cannot reach the Dask scheduler at {address}: {reason}") from exc
    with client:
        yield client


def ingest(
    paths: Iterable[str | Path],
    warehouse_dir: str | Path,
    *,
    study: str | None = None,
    run: str | None = None,
    ranks: Mapping[str, int] | None = None,
    scheduler: str | None = None,
    progress: str | Progress | None = "off",
    facts: Mapping[str, Any] | None = None,
) -> IngestSummary:
    """Ingest traces (files or directories), the power logs their manifests list and nccl-tests output.

    `facts` are manifest fields (tokens_per_step, strategy, ...) for the runs found without a manifest.
    """
    if in_worker_start():  # a script without the __main__ guard, re-run by a pool worker: stop it
        raise RuntimeError(
            "tracehouse ingest was called while a worker process started: run the script's work "
            'under `if __name__ == "__main__":`'
        )
    try:
        check_facts(dict(facts or {}))
    except (TypeError, ValueError) as exc:
        raise TracehouseError(f"run facts: {exc}") from exc
    started = time.perf_counter()
    with scheduler_client(scheduler) as client:  # first: a bad scheduler writes nothing
        found = discover(paths, study=study, run=run, ranks=ranks, facts=facts)
        discovered = time.perf_counter() - started
        sizes = [json_size(job.path) for job in (*found.traces, *found.power, *found.nccl_tests)]
        engine = (IN_PROCESS, 1) if client is not None else local_engine(sizes)
        if engine[0] == PROCESSES:
            start_pool_server()  # its imports overlap the driver's, just below
        from tracehouse.pipeline.ingest.load import load_all  # DuckDB, Polars, Dask

        summary = IngestSummary(
            warehouse=str(warehouse_dir),
            not_traces=list(found.not_traces),
            runs=[f"{source.manifest.study}/{source.manifest.run_id}" for source in found.runs],
        )
        summary.phase_s["discover"] = discovered
        reporter = make_progress(progress)
        try:
            load_all(
                found, Path(warehouse_dir), summary=summary, reporter=reporter, engine=engine, client=client
            )
        finally:
            reporter.finish()
    summary.seconds = time.perf_counter() - started
    return summary
