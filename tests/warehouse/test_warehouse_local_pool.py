"""How a local ingest runs its tasks (in-process, threads, a process pool): the uncompressed size decides."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest
from support.dying_task import DYING_NAME, load_or_die
from support.wh_helpers import write_trace
from tracehouse.pipeline.discovery.search import discover
from tracehouse.pipeline.ingest.engine import (
    IN_PROCESS,
    POOL_STARTUP_S,
    PROCESSES,
    TASK_FIXED_S,
    TASK_JSON_BYTES_PER_S,
    THREAD_GIL_SHARE,
    THREADS,
    json_size,
    local_engine,
    start_pool_server,
    unwrapped_isize,
)
from tracehouse.pipeline.ingest.runner import POOL_UNUSABLE, WORKER_DIED, run_tasks
from tracehouse.pipeline.ingest.tasks import load_trace
from tracehouse.pipeline.warehouse.database import create_warehouse

GB = 1 << 30


def test_json_size_is_the_uncompressed_size_of_a_gzip_file_and_the_size_of_a_plain_one(tmp_path):
    text = b'{"traceEvents": []}' * 5000
    (tmp_path / "t.json").write_bytes(text)
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(text))
    assert json_size(tmp_path / "t.json") == len(text)
    assert json_size(tmp_path / "t.json.gz") == len(text)
    assert (tmp_path / "t.json.gz").stat().st_size < len(text) // 50


def test_json_size_of_what_cannot_be_read_is_zero_and_never_blocks(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")  # opening it would wait for a writer forever
    assert json_size(tmp_path / "fifo.json") == 0
    assert json_size(tmp_path / "gone.json") == 0


def test_an_isize_that_wrapped_past_4_gib_is_restored_from_the_gzip_size():
    assert unwrapped_isize(300 * (1 << 20), (5 * GB) % (4 * GB)) == 5 * GB
    assert unwrapped_isize(600 * (1 << 20), (9 * GB) % (4 * GB)) == 9 * GB
    assert unwrapped_isize(10 << 20, 150 << 20) == 150 << 20  # small files: the footer as it is
    assert unwrapped_isize(100 << 20, 1000) == 4 * GB + 1000  # never below the gzip size


def test_one_file_or_one_core_runs_in_process():
    assert local_engine([10 * GB], cores=16) == (IN_PROCESS, 1)  # one file: nothing to share
    assert local_engine([GB, GB], cores=1) == (IN_PROCESS, 1)
    assert local_engine([], cores=2) == (IN_PROCESS, 1)


def test_more_files_run_on_threads_until_the_pool_finishes_first():
    # Two files on two cores, work w: threads take w * (g + (1 - g) / 2), the pool w / 2 + start-up;
    # they break even at w = start-up / (g / 2).
    even_s = POOL_STARTUP_S / (THREAD_GIL_SHARE / 2)
    per_file = (even_s / 2 - TASK_FIXED_S) * TASK_JSON_BYTES_PER_S
    assert local_engine([int(per_file * 0.9)] * 2, cores=2) == (THREADS, 2)
    assert local_engine([int(per_file * 1.1)] * 2, cores=2) == (PROCESSES, 2)
    assert local_engine([1000] * 3, cores=2) == (THREADS, 2)  # tiny files: threads still overlap I/O
    assert local_engine([1000] * 3, cores=8)[1] == 3  # never more workers than files
    assert local_engine([GB] * 64, cores=2) == (PROCESSES, 2)


def test_threads_start_no_more_tasks_once_the_driver_stops(tmp_path):
    for rank in range(8):
        write_trace(tmp_path / "run" / f"r{rank}.json", rank=rank, world_size=8)
    tasks = [(load_trace, job) for job in discover([tmp_path / "run"]).traces]
    warehouse = create_warehouse(tmp_path / "wh")
    groups = run_tasks(tasks, str(warehouse), frozenset(), client=None, engine=(THREADS, 1))
    [first] = next(group for group in groups if group)
    assert first.status == "loaded"
    groups.close()  # the driver stops here (an error, Ctrl-C): the helper thread is joined
    written = [p for p in (warehouse / "parquet" / "events").rglob("*.parquet") if p.name != "_empty.parquet"]
    assert 1 <= len(written) <= 2  # the first task, and at most the one already running


def _eight_rank_tasks(tmp_path, task=load_trace):
    for rank in range(8):
        write_trace(tmp_path / "run" / f"r{rank}.json", rank=rank, world_size=8)
    return [(task, job) for job in discover([tmp_path / "run"]).traces]


def _written(warehouse):
    return [p for p in (warehouse / "parquet" / "events").rglob("*.parquet") if p.name != "_empty.parquet"]


def test_without_a_forkserver_the_files_run_on_threads(monkeypatch):
    import multiprocessing

    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])  # as on Windows
    assert local_engine([GB] * 64, cores=2) == (THREADS, 2)


def test_the_process_pool_starts_no_more_tasks_once_the_driver_stops(tmp_path):
    tasks = _eight_rank_tasks(tmp_path)
    warehouse = create_warehouse(tmp_path / "wh")
    groups = run_tasks(tasks, str(warehouse), frozenset(), client=None, engine=(PROCESSES, 1))
    [first] = next(group for group in groups if group)
    assert first.status == "loaded"
    groups.close()  # the driver stops: the task already submitted finishes, no other starts
    assert 1 <= len(_written(warehouse)) <= 2


def test_the_process_pool_skips_what_is_registered(tmp_path):
    tasks = _eight_rank_tasks(tmp_path)
    warehouse = create_warehouse(tmp_path / "wh")
    first = [o for group in run_tasks(tasks[:1], str(warehouse), frozenset(), client=None) for o in group]
    registered = frozenset({first[0].content_hash})  # sent once to each worker, not with every task
    outcomes = [
        o
        for group in run_tasks(tasks, str(warehouse), registered, client=None, engine=(PROCESSES, 2))
        for o in group
    ]
    status = {o.path: o.status for o in outcomes}
    assert status.pop(first[0].path) == "skipped"
    assert sorted(status.values()) == ["loaded"] * 7


def test_a_file_that_kills_its_worker_process_fails_alone(tmp_path):
    tasks = _eight_rank_tasks(tmp_path, load_or_die)
    dying = write_trace(tmp_path / "run" / DYING_NAME, rank=0, world_size=8)
    tasks.insert(3, (load_or_die, discover([dying]).traces[0]))
    warehouse = create_warehouse(tmp_path / "wh")
    outcomes = [
        o
        for group in run_tasks(tasks, str(warehouse), frozenset(), client=None, engine=(PROCESSES, 2))
        for o in group
    ]
    assert sorted(o.path for o in outcomes) == sorted(str(job.path) for _, job in tasks)  # each file once
    [died] = [o for o in outcomes if o.status != "loaded"]
    assert died.path == str(dying) and died.status == "failed" and died.internal
    assert WORKER_DIED in (died.reason or "")
    assert len(_written(warehouse)) == 8


def test_pool_workers_take_the_drivers_settings_at_each_ingest(tmp_path, monkeypatch):
    """The pool's server may have started before a setting changed (a notebook, a test): each
    ingest's workers read the driver's TRACEHOUSE_* variables as they are now."""
    pytest.importorskip("tracehouse.pipeline.parsers.kineto._kineto_scan")
    tasks = _eight_rank_tasks(tmp_path)[:2]
    start_pool_server()

    def decoders(warehouse: str, scanner: str | None) -> list[str]:
        if scanner is None:
            monkeypatch.delenv("TRACEHOUSE_SCANNER", raising=False)
        else:
            monkeypatch.setenv("TRACEHOUSE_SCANNER", scanner)
        groups = run_tasks(tasks, warehouse, frozenset(), client=None, engine=(PROCESSES, 2))
        return sorted(o.row["decoder"] for group in groups for o in group)

    assert decoders(str(create_warehouse(tmp_path / "a")), "0") == ["msgspec", "msgspec"]
    assert decoders(str(create_warehouse(tmp_path / "b")), None) == ["scanner", "scanner"]


UNGUARDED_SCRIPT = """
import json, sys
import tracehouse.pipeline.ingest.driver as driver
driver.local_engine = lambda sizes: ("processes", 2)  # as for a batch large enough for the pool
summary = driver.ingest([sys.argv[1]], sys.argv[2], study="s")
print(json.dumps({"loaded": summary.loaded, "failed": summary.failed, "warnings": summary.warnings}))
"""


def test_a_script_without_the_main_guard_still_ingests_everything_on_threads(tmp_path):
    """Every pool worker re-runs the driver's script; without `if __name__ == "__main__":` each dies
    starting, so the pool cannot run: the files run on threads and the summary says why."""
    for rank in range(3):
        write_trace(tmp_path / "run" / f"r{rank}.json", rank=rank, world_size=3)
    script = tmp_path / "ingest_script.py"
    script.write_text(UNGUARDED_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run"), str(tmp_path / "wh")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    summary = json.loads(done.stdout.splitlines()[-1])
    assert (summary["loaded"], summary["failed"]) == (3, [])
    assert POOL_UNUSABLE in summary["warnings"]
    assert 'under `if __name__ == "__main__":`' in done.stderr  # what each worker said as it stopped


def test_the_pool_servers_exit_rule_acts_in_the_server_only():
    """pool_server makes the forkserver leave at once; imported anywhere else, an exit status stays."""
    code = (
        "import tracehouse.pipeline.ingest.pool_server as p\n"
        "assert not p.imported_by_the_forkserver()\n"
        "raise SystemExit(3)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 3
