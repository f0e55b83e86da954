"""Run the ingest's tasks on Dask: a cluster's client, or locally as `engine.local_engine` chose.

Outcomes come back in groups as tasks complete, so the driver registers them while the others
run. A task that raised, or whose worker process died, fails its file only.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import dask
import dask.threaded
from dask.callbacks import Callback
from dask.local import get_sync
from tracehouse.pipeline.discovery.jobs import NcclTestsJob, PowerJob, TraceJob
from tracehouse.pipeline.ingest.engine import IN_PROCESS, PROCESSES, THREADS, pool_context
from tracehouse.pipeline.ingest.tasks import (
    NCCL_TESTS,
    FileOutcome,
    failed_internally,
    guarded_task,
    in_pool_worker,
    prepare_worker,
    raised_outcome,
)

Task = tuple[Callable[..., FileOutcome], Any]
KIND_OF_JOB: dict[type, str] = {TraceJob: "trace", PowerJob: "power", NcclTestsJob: NCCL_TESTS}


def kind_of(job: Any) -> str:
    """The kind of file a task's job reads (what its outcome says when the task fails)."""
    return KIND_OF_JOB[type(job)]


POLL_S = 0.05  # how often the driver looks for completed tasks
# Why a file fails whose task ran alone on a fresh worker process and the process died.
WORKER_DIED = "the worker process died reading this file (alone on a fresh worker, after a pool failed)"
# The warning when no worker process can start at all; the files then run on threads.
POOL_UNUSABLE = (
    "the local process pool could not start a worker, so the files ran on threads (slower); "
    'a script that ingests needs its work under `if __name__ == "__main__":`, as any script '
    "whose library starts processes"
)


def run_tasks(
    tasks: list[Task],
    warehouse_dir: str,
    registered: frozenset[str],
    *,
    client: Any,
    engine: tuple[str, int] = (IN_PROCESS, 1),
    warn: Callable[[str], None] = lambda line: None,
) -> Generator[list[FileOutcome], None, None]:
    """Run the tasks on Dask: the client's cluster, else locally as `engine` says (`local_engine`).

    Yields outcomes in groups as they complete. An empty group means nothing completed for a
    moment: the caller may register what it holds. Except in-process, the first group is empty
    and comes as soon as the tasks are under way. `warn` gets one line about the run itself.
    """
    mode, workers = engine
    if client is not None:
        yield from _on_client(client, tasks, warehouse_dir, registered)
    elif mode == THREADS:
        yield from _on_threads(tasks, warehouse_dir, registered, workers)
    elif mode == PROCESSES:
        yield from _on_processes(tasks, warehouse_dir, registered, workers, warn)
    else:
        for fn, job in tasks:
            yield [dask.delayed(fn, pure=False)(job, warehouse_dir, registered).compute(scheduler=get_sync)]


def _on_threads(
    tasks: list[Task], warehouse_dir: str, registered: frozenset[str], threads: int
) -> Iterator[list[FileOutcome]]:
    """The tasks on Dask's threaded scheduler; outcomes as each completes.

    When the caller stops early (an error, Ctrl-C), the tasks not started yet do nothing.
    """
    stop = threading.Event()
    graph = [
        dask.delayed(_unless_stopped, pure=False)(stop, fn, job, warehouse_dir, registered)
        for fn, job in tasks
    ]

    def compute(callback: Callback) -> None:
        with callback:
            # the function, not the name "threads": a name makes Dask import distributed (0.1 s)
            dask.compute(*graph, scheduler=dask.threaded.get, num_workers=threads)

    yield from _in_background(graph, compute, stop)


def _on_processes(
    tasks: list[Task],
    warehouse_dir: str,
    registered: frozenset[str],
    workers: int,
    warn: Callable[[str], None],
) -> Iterator[list[FileOutcome]]:
    """The tasks on Dask's local process scheduler (see `engine`); outcomes as each completes.

    When a worker process dies (the pool then stops), the tasks that did not complete run again,
    each alone on a fresh worker: the file that kills its worker then fails alone. When no worker
    can run even an empty task (an unguarded script re-run by every worker, say), they run on
    threads instead, with a warning.
    """
    unfinished = yield from _pool_round(tasks, warehouse_dir, registered, workers)
    if unfinished and not _pool_starts(registered):
        warn(POOL_UNUSABLE)
        yield from _on_threads(unfinished, warehouse_dir, registered, workers)
        return
    for task in unfinished:
        if (yield from _pool_round([task], warehouse_dir, registered, 1)):
            _, job = task
            yield [failed_internally(kind_of(job), job.path, RuntimeError(WORKER_DIED))]


def _pool_round(
    tasks: list[Task], warehouse_dir: str, registered: frozenset[str], workers: int
) -> Iterator[list[FileOutcome]]:
    """Run tasks on a fresh pool; return (as the generator's value) the tasks left when a worker died."""
    from concurrent.futures.process import BrokenProcessPool

    import dask.multiprocessing

    stop = threading.Event()
    executor = _new_pool(workers, registered)
    graph = [
        dask.delayed(in_pool_worker, pure=False)(fn, kind_of(job), job, warehouse_dir) for fn, job in tasks
    ]
    task_of = {item.key: task for item, task in zip(graph, tasks, strict=True)}
    completed: set[Any] = set()
    broken = threading.Event()

    def compute(callback: Callback) -> None:
        def pretask(key: Any, *_: Any) -> None:
            if stop.is_set():  # the driver stopped: submit nothing more
                raise _Stopped

        def posttask(key: Any, *_: Any) -> None:
            completed.add(key)

        try:
            with callback, Callback(pretask=pretask, posttask=posttask):
                get = dask.multiprocessing.get
                dask.compute(*graph, scheduler=get, pool=executor, num_workers=workers, chunksize=1)
        except BrokenProcessPool:
            broken.set()
        except _Stopped:
            pass

    try:
        yield from _in_background(graph, compute, stop)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    return [task for key, task in task_of.items() if key not in completed] if broken.is_set() else []


def _new_pool(workers: int, registered: frozenset[str]) -> Any:
    """A ProcessPoolExecutor forked from the pool's server, with this ingest's hashes and settings."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(
        workers,
        mp_context=pool_context(),
        initializer=prepare_worker,
        initargs=(registered, dict(os.environ), os.getpid()),
    )


def _pool_starts(registered: frozenset[str]) -> bool:
    """Whether a fresh one-worker pool can run an empty task (else no file can run on a pool here)."""
    from concurrent.futures.process import BrokenProcessPool

    executor = _new_pool(1, registered)
    try:
        return executor.submit(int).result() == 0
    except BrokenProcessPool:
        return False
    finally:
        executor.shutdown(wait=True, cancel_futures=True)


class _Stopped(Exception):
    """The driver stopped early: the scheduler submits no more tasks."""


def _in_background(
    graph: list[Any], compute: Callable[[Callback], None], stop: threading.Event
) -> Iterator[list[FileOutcome]]:
    """Run `compute(callback)` on a helper thread; yield each task's outcome as Dask reports it.

    Dask calls the callback's `posttask` as each task completes; the outcome goes through a queue
    to this (the driver's) thread, which registers it while the other tasks run. On leaving
    (done, an error, Ctrl-C) `stop` is set and the helper joined.
    """
    completed: queue.SimpleQueue[Any] = queue.SimpleQueue()
    keys = {item.key for item in graph}

    def posttask(key: Any, result: Any, *_: Any) -> None:
        if key in keys and result is not None:
            completed.put(result)

    def run() -> None:
        try:
            compute(Callback(posttask=posttask))
        except BaseException as exc:  # a bug outside the tasks' own guard: the driver raises it
            completed.put(exc)
        completed.put(None)

    helper = threading.Thread(target=run, name="tracehouse-ingest-tasks", daemon=True)
    helper.start()
    try:
        yield []  # under way: the caller may do its own work before it waits for an outcome
        while (item := _next(completed)) is not None:
            if isinstance(item, BaseException):
                raise item
            yield [item] if isinstance(item, FileOutcome) else []
    finally:
        stop.set()
        helper.join()


_NOTHING_YET = object()


def _next(completed: queue.SimpleQueue[Any]) -> Any:
    """The next completed item, or _NOTHING_YET after POLL_S with nothing."""
    try:
        return completed.get(timeout=POLL_S)
    except queue.Empty:
        return _NOTHING_YET


def _unless_stopped(
    stop: threading.Event,
    fn: Callable[..., FileOutcome],
    job: Any,
    warehouse_dir: str,
    registered: frozenset[str],
) -> FileOutcome | None:
    """One task (`guarded_task`), unless the ingest stopped before it started."""
    return None if stop.is_set() else guarded_task(fn, kind_of(job), job, warehouse_dir, registered)


def _on_client(
    client: Any, tasks: list[Task], warehouse_dir: str, registered: frozenset[str]
) -> Iterator[list[FileOutcome]]:
    from distributed import as_completed

    [shared] = client.scatter([registered], broadcast=True)  # one object, not its items
    futures = {client.submit(fn, job, warehouse_dir, shared, pure=False): job for fn, job in tasks}
    completed = as_completed(futures)
    try:
        yield []  # submitted: the caller may do its own work before it waits for an outcome
        while not completed.is_empty():
            done = completed.next_batch(block=False)
            if not done:
                time.sleep(POLL_S)
            yield [_outcome(future, futures[future]) for future in done]
    finally:  # the caller stopped early: the tasks not started never start (a running one ends on its worker)
        client.cancel([future for future in futures if not future.done()])


def _outcome(future: Any, job: Any) -> FileOutcome:
    """A completed task's outcome; a task that raised (a worker died, a bug) fails its file only."""
    try:
        return future.result()
    except Exception as exc:
        return raised_outcome(kind_of(job), job.path, exc)
