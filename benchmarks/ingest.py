"""Parse speed and memory: tracehouse `parse_trace` vs Holistic Trace Analysis, one core each.

Each measurement runs in a fresh subprocess pinned to one CPU; peak RSS is the child's
`ru_maxrss` (about 90 MB of it is the interpreter and libraries; `--big` also prints the
growth during the parse, above the peak after imports). Seconds exclude imports.
Each side runs `--repeat` times (default 5), the two parsers alternating, and the fastest run
counts (wall `s`; `cpu s` is that run's process CPU time): the machine is shared, so the
minimum is the least noisy estimate for both parsers alike. HTA loads a directory holding a
symlink to the one trace (it wants a folder of rank traces).

    .venv/bin/python benchmarks/ingest.py [--repeat N] [TRACE ...]   # default: real traces in ../shared/data
    .venv/bin/python benchmarks/ingest.py --big [--big-path /tmp/tracehouse_big_trace.json]

End to end, every core (no pinning): `--end-to-end` times the `tracehouse ingest` command (a
fresh process: interpreter, imports, parse, register, views, materialized tables) against HTA's
`TraceAnalysis` load (imports excluded) on the same `--ranks` copies of `--source`
(benchmarks/replicate.py: ranks patched, clocks shifted, `--copies K` timelines per rank; `--ranks 1`:
the source as it is);
`--each` does it for every shared trace of at least 20k complete events, one row per trace with
the ingest's phases (from its `--json` summary), then the worst and median ratios;
`--incremental` times the ingest of `--ranks` such copies as a new run into a warehouse already
holding `--base-ranks` of them against the same ingest into an empty warehouse;
`--pool-startup` measures what the local process pool costs to start (engine.POOL_STARTUP_S);
`--cluster` times `tracehouse ingest --scheduler` on a real `dask scheduler` on 127.0.0.1 with
1 worker, then 2 (`--ranks` copies, default 16; each a fresh warehouse), and prints the ratio,
each run's phases (start, tasks, finish) with the driver's CPU time, and what bounds the ratio:
what a cluster cannot spread, the driver's CPU per file registered and per run refreshed (from
the ingest's `--json` summary, `driver_cpu_s`) against the scheduler's and workers' CPU.

    .venv/bin/python benchmarks/ingest.py --end-to-end [--source TRACE] [--ranks 8] [--copies 1] [--repeat 3]
    .venv/bin/python benchmarks/ingest.py --end-to-end --each [--ranks 8] [--repeat 3]
    .venv/bin/python benchmarks/ingest.py --incremental [--base-ranks 64] [--ranks 8] [--repeat 3]
    .venv/bin/python benchmarks/ingest.py --pool-startup [--repeat 3]
    .venv/bin/python benchmarks/ingest.py --cluster [--source TRACE] [--ranks 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from replicate import DEFAULT_SOURCE, Replicator

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"
DEFAULT_TRACES = [
    "hta/nccl_parser_config_rank0.json.gz",
    "hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "hta/pair_sampled_rank-0.json.gz",
    "tracelens/mi300_ddp_rank0_of8.json.gz",
    "tracelens/b200_vllm_eager_rank0_of8.json.gz",
    "param/resnet_rtx2080ti.json.gz",
]

_PRELUDE = """
import json, os, resource, sys, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
"""
_TRACEHOUSE = (
    _PRELUDE
    + """
from tracehouse.pipeline.parsers.kineto.parse import parse_trace
base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t, c = time.perf_counter(), time.process_time()
parsed = parse_trace(sys.argv[1])
seconds, cpu = time.perf_counter() - t, time.process_time() - c
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"events": parsed.events.height, "seconds": seconds, "cpu": cpu,
                  "rss_mb": rss_mb, "base_mb": base_mb}))
"""
)
_HTA = (
    _PRELUDE
    + """
import logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t, c = time.perf_counter(), time.process_time()
TraceAnalysis(trace_dir=sys.argv[1])
seconds, cpu = time.perf_counter() - t, time.process_time() - c
rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "cpu": cpu, "rss_mb": rss_mb}))
"""
)


def child(code: str, arg: str, repeat: int = 1) -> dict:
    """The fastest of `repeat` runs of code in a fresh interpreter (its last stdout line: JSON)."""
    return fastest([_child_once(code, arg) for _ in range(repeat)])


def fastest(runs: list[dict]) -> dict:
    """The run with the fewest seconds among those without an error (else the first)."""
    ok = [r for r in runs if "error" not in r]
    return min(ok, key=lambda r: r["seconds"]) if ok else runs[0]


def _child_once(code: str, arg: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1][:80]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def uncompressed_mb(path: Path) -> float:
    """Size of the JSON text in MB (gunzipped when needed)."""
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        return path.stat().st_size / 1e6
    with gzip.open(path, "rb") as f:
        return sum(len(chunk) for chunk in iter(lambda: f.read(1 << 24), b"")) / 1e6


def both_runs(path: Path, repeat: int) -> tuple[dict, dict]:
    """(tracehouse, HTA): the fastest of `repeat` runs each, the two sides alternating.

    Alternating puts both parsers through the same spells of load on this shared machine.
    HTA loads a directory holding only this trace.
    """
    with tempfile.TemporaryDirectory() as tmp:
        name = path.name if path.name.endswith((".json", ".json.gz")) else path.name + ".json"
        (Path(tmp) / name).symlink_to(path.resolve())
        runs = [(_child_once(_TRACEHOUSE, str(path)), _child_once(_HTA, tmp)) for _ in range(repeat)]
    return fastest([ours for ours, _ in runs]), fastest([theirs for _, theirs in runs])


def row(label: str, events: int, mb: float, result: dict) -> str:
    if "error" in result:
        return f"{label:<11}{'':>9}{mb:>9.1f}  error: {result['error']}"
    s, cpu = result["seconds"], result["cpu"]
    return (
        f"{label:<11}{events:>9}{mb:>9.1f}{s:>9.3f}{cpu:>9.3f}{events / s:>12,.0f}{mb / s:>9.1f}"
        f"{result['rss_mb']:>9.0f}"
    )


HEADER = f"{'parser':<11}{'events':>9}{'MB':>9}{'s':>9}{'cpu s':>9}{'events/s':>12}{'MB/s':>9}{'RSS MB':>9}"


def compare(paths: list[Path], repeat: int) -> None:
    """Print the tracehouse vs HTA table."""
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; best of {repeat} runs")
    print(HEADER)
    ratios, cpu_ratios, totals = [], [], [0.0, 0.0]
    for path in paths:
        mb = uncompressed_mb(path)
        ours, theirs = both_runs(path, repeat)
        events = ours.get("events", 0)
        print(f"-- {path.name}")
        print(row("tracehouse", events, mb, ours))
        print(row("HTA", events, mb, theirs))
        if "error" not in ours and "error" not in theirs:
            ratios.append(theirs["seconds"] / ours["seconds"])
            cpu_ratios.append(theirs["cpu"] / ours["cpu"])
            totals = [totals[0] + ours["seconds"], totals[1] + theirs["seconds"]]
            print(
                f"   speed ratio tracehouse/HTA: {ratios[-1]:.1f}x (cpu {cpu_ratios[-1]:.1f}x)   RSS ratio: "
                f"{ours['rss_mb'] / theirs['rss_mb']:.2f}"
            )
    if ratios:
        print(
            f"median speed ratio over {len(ratios)} traces: {statistics.median(ratios):.1f}x "
            f"(cpu time: {statistics.median(cpu_ratios):.1f}x); all traces together: "
            f"{totals[1] / totals[0]:.1f}x"
        )


def big(path: Path) -> None:
    """The 1 GB trace through parse_trace only: speed and RSS against the file size."""
    mb = uncompressed_mb(path)
    ours = child(_TRACEHOUSE, str(path))
    print(HEADER)
    print(row("tracehouse", ours.get("events", 0), mb, ours))
    if "error" not in ours:
        growth = (ours["rss_mb"] - ours["base_mb"]) / mb
        print(f"peak RSS / file size: {ours['rss_mb'] / mb:.2f} (+parse / file size: {growth:.2f})")


_HTA_ALL_CORES = """
import time
t0 = time.perf_counter()
import json, logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = time.perf_counter()
loaded = TraceAnalysis(trace_dir=sys.argv[1])
end = time.perf_counter()
print(json.dumps({"seconds": end - t, "with_imports": end - t0, "ranks": len(loaded.t.traces)}))
"""
_POOL_STARTUP = """
import json, os, time
from concurrent.futures import ProcessPoolExecutor

def run():
    from tracehouse.pipeline.ingest.engine import pool_context, start_pool_server
    from tracehouse.pipeline.ingest.tasks import prepare_worker  # the driver imports it anyway
    t0 = time.perf_counter()
    start_pool_server()
    t1 = time.perf_counter()
    pool = ProcessPoolExecutor(2, mp_context=pool_context(), initializer=prepare_worker,
                               initargs=(frozenset(), dict(os.environ), os.getpid()))
    first = [pool.submit(time.sleep, 0.1) for _ in range(2)]  # both busy at once: two workers
    [f.result() for f in first]
    processes = len(pool._processes)
    t2 = time.perf_counter() - 0.1  # less the task each worker ran
    pool.shutdown(wait=True)
    t3 = time.perf_counter() - 0.1
    print(json.dumps({"server": t1 - t0, "workers": t2 - t1, "close": t3 - t2, "seconds": t3 - t0,
                      "processes": processes}))

if __name__ == "__main__":
    run()
"""
TRACEHOUSE = Path(sys.executable).with_name("tracehouse")


def ingest_command(paths: list[Path], warehouse: Path, run: str) -> float:
    """Wall seconds of one `tracehouse ingest` process."""
    started = time.perf_counter()
    subprocess.run(
        [
            str(TRACEHOUSE),
            "ingest",
            *map(str, paths),
            "--warehouse",
            str(warehouse),
            "--study",
            "bench",
            "--run",
            run,
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - started


def _runs(seconds: list[float]) -> str:
    return ", ".join(f"{s:.2f}" for s in seconds)


def _load_line() -> str:
    return f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"


def end_to_end(source: Path, ranks: int, repeat: int, copies: int = 1) -> None:
    """The `tracehouse ingest` command vs HTA's TraceAnalysis load, same rank traces, alternating."""
    replicator = Replicator(source, copies=copies)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "traces"
        if ranks == 1 and copies == 1:  # the source itself, as it is
            folder.mkdir()
            paths = [folder / source.name]
            paths[0].symlink_to(source.resolve())
        else:
            paths = replicator.run(folder, ranks=ranks)
        mb = sum(uncompressed_mb(p) for p in paths)
        print(
            f"{_load_line()}; {ranks} ranks of {source.name}: {ranks * replicator.n_events:,} events, "
            f"{mb:.0f} MB of JSON; best of {repeat}"
        )
        ours, theirs, hta_runs = [], [], []
        for i in range(repeat):
            ours.append(ingest_command([folder], Path(tmp) / f"wh{i}", "r"))
            hta_runs.append(_child_once(_HTA_ALL_CORES, str(folder)))
            theirs.append(hta_runs[-1].get("seconds", float("nan")))
    if any(r.get("ranks") != ranks for r in hta_runs):
        print(f"HTA did not load every rank: {hta_runs}")
        return
    ours_s, theirs_s = min(ours), min(theirs)
    with_imports = min(r["with_imports"] for r in hta_runs)
    print(f"tracehouse ingest command (whole process): {ours_s:.2f} s   runs: {_runs(ours)}")
    print(
        f"HTA TraceAnalysis load (imports excluded): {theirs_s:.2f} s   runs: "
        f"{', '.join(f'{s:.2f}' for s in theirs)}"
    )
    print(f"HTA process from its first import: {with_imports:.2f} s (ratio {with_imports / ours_s:.2f}x)")
    print(
        f"ratio HTA load / tracehouse command: {theirs_s / ours_s:.2f}x "
        f"({ranks * replicator.n_events / ours_s:,.0f} events/s end to end)"
    )


def ingest_json(folder: Path, warehouse: Path) -> dict:
    """One `tracehouse ingest --json` process: its wall seconds and its summary (phases, driver CPU)."""
    args = [str(TRACEHOUSE), "ingest", str(folder), "--warehouse", str(warehouse), "--study", "bench"]
    started = time.perf_counter()
    done = subprocess.run([*args, "--run", "r", "--json"], check=True, capture_output=True, text=True)
    return {"wall": time.perf_counter() - started, "summary": json.loads(done.stdout)}


# --each: the shared traces with at least this many complete events are replicated and timed.
EACH_MIN_EVENTS = 20_000
# The phases of the `tracehouse ingest` process --each prints: `process` is the interpreter, the
# imports and the exit (its wall seconds less the summary's); the rest are the summary's `phase_s`.
EACH_PHASES = ("process", "discover", "catalog", "tasks", "register", "refresh")


def _each_row(source: Path, ranks: int, repeat: int) -> dict | None:
    """One shared trace replicated to `ranks` ranks: the best of `repeat` ingests and HTA loads."""
    try:
        replicator = Replicator(source)
    except Exception as exc:  # a trace the replicator cannot rewrite is named, not timed
        print(f"{source.parent.name}/{source.name}: cannot replicate ({type(exc).__name__}: {exc})")
        return None
    if replicator.n_events < EACH_MIN_EVENTS:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "traces"
        paths = replicator.run(folder, ranks=ranks)
        mb = sum(uncompressed_mb(p) for p in paths)
        ours, theirs = [], []
        for i in range(repeat):
            ours.append(ingest_json(folder, Path(tmp) / f"wh{i}"))
            hta = _child_once(_HTA_ALL_CORES, str(folder))
            theirs.append(hta["seconds"] if hta.get("ranks") == ranks else float("nan"))
    best = min(ours, key=lambda r: r["wall"])
    phases = {"process": best["wall"] - best["summary"]["seconds"], **best["summary"]["phase_s"]}
    return {
        "trace": f"{source.parent.name}/{source.name.split('.json')[0]}",
        "events": ranks * replicator.n_events,
        "mb": mb,
        "ours": best["wall"],
        "hta": min(theirs),
        "phases": phases,
    }


def each(ranks: int, repeat: int) -> None:
    """--each: every shared trace of at least EACH_MIN_EVENTS complete events, as `ranks` ranks: the
    whole `tracehouse ingest` process against HTA's load (imports excluded), with the ingest's phases."""
    print(
        f"{_load_line()}; every trace of {SHARED} with >= {EACH_MIN_EVENTS:,} complete events, replicated "
        f"to {ranks} ranks; best of {repeat}; phases in s: {', '.join(EACH_PHASES)} "
        "(register runs inside tasks)"
    )
    print(
        f"{'trace':<44} {'events':>10} {'MB':>6} {'ours s':>7} {'HTA s':>7} {'ratio':>6} "
        f"{'events/s':>10} {'MB/s':>6}  phases"
    )
    rows = [r for source in sorted(SHARED.rglob("*.json.gz")) if (r := _each_row(source, ranks, repeat))]
    for r in rows:
        phases = " ".join(f"{r['phases'][name]:.2f}" for name in EACH_PHASES)
        print(
            f"{r['trace']:<44} {r['events']:>10,} {r['mb']:>6.0f} {r['ours']:>7.2f} {r['hta']:>7.2f} "
            f"{r['hta'] / r['ours']:>5.1f}x {r['events'] / r['ours']:>10,.0f} {r['mb'] / r['ours']:>6.0f}  "
            + phases
        )
    ratios = sorted(r["hta"] / r["ours"] for r in rows if r["hta"] == r["hta"])
    if ratios:
        print(
            f"{len(ratios)} traces: worst {ratios[0]:.1f}x (target >= 8x), "
            f"median {statistics.median(ratios):.1f}x (target >= 12x)"
        )


def incremental(source: Path, base_ranks: int, ranks: int, repeat: int) -> None:
    """Ingest of `ranks` new ranks into a warehouse holding `base_ranks` vs into an empty one."""
    replicator = Replicator(source)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base_paths = replicator.run(root / "base", ranks=base_ranks)
        new_paths = replicator.run(root / "new", ranks=ranks, offset_ns=10**12)
        base_s = ingest_command(base_paths, root / "base_wh", "base")
        held = base_ranks * replicator.n_events
        print(
            f"{_load_line()}; base: {base_ranks} ranks of {source.name}, {held:,} events "
            f"(ingested in {base_s:.1f} s); new run: {ranks} ranks, {ranks * replicator.n_events:,} events"
        )
        into_base, into_empty = [], []
        for i in range(repeat):
            copy = root / f"copy{i}"
            shutil.copytree(root / "base_wh", copy)
            if i % 2:  # alternate which goes first: the second finds the files in the page cache
                into_empty.append(ingest_command(new_paths, root / f"empty{i}", "new"))
            into_base.append(ingest_command(new_paths, copy, "new"))
            if not i % 2:
                into_empty.append(ingest_command(new_paths, root / f"empty{i}", "new"))
            shutil.rmtree(copy)
    a, b = min(into_base), min(into_empty)
    print(f"into the warehouse holding {held:,} events: {a:.2f} s   runs: {_runs(into_base)}")
    print(f"into an empty warehouse: {b:.2f} s   runs: {', '.join(f'{s:.2f}' for s in into_empty)}")
    print(f"ratio held / empty: {a / b:.2f}x")


DASK = Path(sys.executable).with_name("dask")
CLUSTER_WAIT_S = 120  # how long a scheduler and its workers may take to come up
# Workers start as the driver's docstring advises (the task module preloaded), and each new one
# runs one trace task before any timed run, so the 2-worker runs (a fresh second worker each
# round) time workers as warm as the 1-worker runs.
TASK_MODULE = "tracehouse.pipeline.ingest.tasks"
FILE_LINE = re.compile(r"^tracehouse ingest: (\[\d+/\d+\] |error: )")  # LineProgress, one per file


def _spawn(args: list[str]) -> subprocess.Popen:
    """A process in its own process group (stopping the group also stops a nanny's worker)."""
    return subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def _stop(procs: list[subprocess.Popen]) -> None:
    """Terminate each process group, then kill what is left after a grace period."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_worker(address: str) -> subprocess.Popen:
    command = [str(DASK), "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard"]
    return _spawn([*command, "--preload", TASK_MODULE])


def _wait_for_workers(address: str, n: int, warm_up: Path) -> None:
    """Return once the scheduler at address has exactly n workers connected, each warmed up.

    Warm: every worker has run a trace task once (into the scratch warehouse `warm_up`), so no
    timed run pays a worker's first-use costs (imports, the first parse and Parquet write).
    """
    from distributed import Client
    from tracehouse.pipeline.discovery.search import discover
    from tracehouse.pipeline.ingest.tasks import load_trace
    from tracehouse.pipeline.warehouse.database import create_warehouse

    with Client(address, timeout=CLUSTER_WAIT_S) as client:
        client.wait_for_workers(n, timeout=CLUSTER_WAIT_S)
        deadline = time.monotonic() + CLUSTER_WAIT_S
        while len(client.scheduler_info(n_workers=-1)["workers"]) != n:  # a stopped worker may linger
            if time.monotonic() > deadline:
                raise RuntimeError(f"{address}: not {n} workers after {CLUSTER_WAIT_S} s")
            time.sleep(0.1)
        job = discover([warm_up / "trace"]).traces[0]
        client.run(load_trace, job, str(create_warehouse(warm_up / "wh")), frozenset())


def _cpu_s(procs: list[psutil.Process]) -> float:
    """CPU seconds (user + system) the processes and their children have used so far."""
    total = 0.0
    for proc in procs:
        for p in [proc, *proc.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                times = p.cpu_times()
                total += times.user + times.system
    return total


def _busy_s() -> float:
    """CPU seconds the whole machine has been busy (every process, all cores) since boot."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def cluster_ingest(folder: Path, warehouse: Path, address: str, cluster: list[psutil.Process]) -> dict:
    """One `tracehouse ingest --scheduler` process, its phases timed by its progress lines on stderr.

    Phases: start (to the `N file(s) to ingest` line: interpreter, imports, connecting,
    discovery, catalog set-up), tasks (to the last file's line: parsing on the workers,
    registering on the driver; a run's files are reported once all its ranks are back), finish
    (to exit: the views and materialized tables). CPU seconds from psutil: the driver's per
    phase, the scheduler's and workers' (`cluster`) over the whole ingest, and what other
    processes used meanwhile (`others`: the machine is shared; a busy neighbour skews a run).
    """
    args = [str(TRACEHOUSE), "ingest", str(folder), "--warehouse", str(warehouse), "--scheduler", address]
    args.append("--json")  # its summary (small: one run) holds the driver's CPU per phase
    cluster_before, busy_before = _cpu_s(cluster), _busy_s()
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    driver = psutil.Process(proc.pid)
    marks, last = {}, ""
    for line in proc.stderr:
        mark = (time.perf_counter() - started, _cpu_s([driver]))
        last = line.strip() or last
        if "file(s) to ingest" in line:
            marks["start"] = mark
        elif FILE_LINE.search(line):  # a file's outcome, not the summary or warnings after them
            marks["tasks"] = mark
    summary = json.loads(proc.stdout.read())
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds, driver_cpu = time.perf_counter() - started, usage.ru_utime + usage.ru_stime
    if proc.returncode != 0:
        raise RuntimeError(f"ingest failed (exit {proc.returncode}): {last}")
    (s_wall, s_cpu), (t_wall, t_cpu) = marks["start"], marks["tasks"]
    cluster_cpu = _cpu_s(cluster) - cluster_before
    return {
        "seconds": seconds,
        "phases": {
            "start": (s_wall, s_cpu),
            "tasks": (t_wall - s_wall, t_cpu - s_cpu),
            "finish": (seconds - t_wall, driver_cpu - t_cpu),
        },
        "cluster_cpu": cluster_cpu,
        "others_cpu": max(0.0, _busy_s() - busy_before - cluster_cpu - driver_cpu),
        "files": summary["loaded"] + summary["power_files"],
        "runs": summary["runs_refreshed"],
        "register_cpu": summary["driver_cpu_s"]["register"],
        "refresh_cpu": summary["driver_cpu_s"]["refresh"],
    }


def workers_alone(folder: Path, warehouse: Path, address: str) -> float:
    """Wall seconds of the ingest's trace tasks submitted straight to the cluster (no driver work)."""
    from distributed import Client, wait
    from tracehouse.pipeline.discovery.search import discover
    from tracehouse.pipeline.ingest.tasks import load_trace
    from tracehouse.pipeline.warehouse.database import create_warehouse

    jobs, target = discover([folder]).traces, str(create_warehouse(warehouse))
    with Client(address, timeout=CLUSTER_WAIT_S) as client:
        started = time.perf_counter()
        wait([client.submit(load_trace, job, target, frozenset(), pure=False) for job in jobs])
        return time.perf_counter() - started


def _phase_line(label: str, run: dict, alone: float) -> str:
    parts = ", ".join(f"{name} {wall:.2f} s (cpu {cpu:.2f})" for name, (wall, cpu) in run["phases"].items())
    return (
        f"  {label}: {run['seconds']:.2f} s = {parts}; scheduler + workers cpu {run['cluster_cpu']:.2f} s, "
        f"other processes {run['others_cpu']:.2f} s; workers alone {alone:.2f} s"
    )


def _driver_lines(ingests: list[dict]) -> None:
    """What the driver costs per file registered and per run refreshed, against the tasks' CPU.

    On a real cluster the tasks spread over the workers and the driver's work does not: the
    share of the tasks' CPU that registering takes bounds how many workers one driver keeps busy
    (the goal: a 1,024-rank run registers in under 10 % of its tasks' CPU).
    """
    files, runs = ingests[0]["files"], ingests[0]["runs"]
    register = statistics.median(r["register_cpu"] for r in ingests)
    refresh = statistics.median(r["refresh_cpu"] for r in ingests)
    tasks = statistics.median(r["cluster_cpu"] for r in ingests)
    print(
        f"driver CPU (median of {len(ingests)} ingests): registering {1e3 * register / files:.1f} ms "
        "per file "
        f"({register:.2f} s for {files} files), refreshing {refresh / max(runs, 1):.2f} s per run "
        f"({runs} run{'s' if runs != 1 else ''}); the scheduler and workers used {tasks:.2f} s "
        f"({1e3 * tasks / files:.0f} ms per file): registering is {100 * register / tasks:.1f} % of the "
        f"tasks' CPU (goal < 10 %)"
    )


def _cluster_summary(one: list[dict], two: list[dict], alone: dict[int, list[float]]) -> None:
    """The best runs, their ratio, and the ratio's bounds from the best 1-worker run's phases."""
    _driver_lines(one + two)
    best = min(one, key=lambda r: r["seconds"])
    a, b = best["seconds"], min(r["seconds"] for r in two)
    print(f"1 worker: {a:.2f} s   runs: {_runs([r['seconds'] for r in one])}")
    print(f"2 workers: {b:.2f} s   runs: {_runs([r['seconds'] for r in two])}")
    print(
        f"ratio 1 worker / 2 workers (best of each): {a / b:.2f}x (on 2 cores the scheduler, the driver "
        "and both workers share them)"
    )
    serial, tasks = best["phases"]["start"][0] + best["phases"]["finish"][0], best["phases"]["tasks"][0]
    scaling = min(alone[1]) / min(alone[2])
    print(
        f"not on the workers (start + finish of the best 1-worker run): {serial:.2f} s of {a:.2f} s; "
        f"a 2x tasks phase would give {a / (serial + tasks / 2):.2f}x; the workers alone scale "
        f"{scaling:.2f}x here, which would give {a / (serial + tasks / scaling):.2f}x"
    )


def cluster(source: Path, ranks: int, repeat: int) -> None:
    """`tracehouse ingest --scheduler` on a real `dask scheduler`: 1 worker, then 2, each round.

    Each round also times the trace tasks submitted straight to the same workers (`workers
    alone`: what the tasks phase could be with a driver that costs nothing), and ends with what
    bounds the ratio: the phases that do not run on the workers, and how the workers scale.
    """
    replicator = Replicator(source)
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp:
        root, folder = Path(tmp), Path(tmp) / "traces"
        replicator.run(folder, ranks=ranks)
        replicator.write(root / "warm" / "trace" / "rank0.pt.trace.json.gz", rank=0, world_size=1)
        mb = sum(uncompressed_mb(p) for p in folder.iterdir())
        port = _free_port()
        address = f"tcp://127.0.0.1:{port}"
        one, two, alone = [], [], {1: [], 2: []}
        try:
            procs.append(
                _spawn([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"])
            )
            procs.append(_start_worker(address))
            _wait_for_workers(address, 1, root / "warm")
            print(
                f"{_load_line()}; {ranks} ranks of {source.name}: {ranks * replicator.n_events:,} events, "
                f"{mb:.0f} MB of JSON; {os.cpu_count()} cores; scheduler {address}, workers "
                f"--nthreads 1 --preload {TASK_MODULE}; best of {repeat}, 1 then 2 workers each round"
            )
            for i in range(repeat):
                for n, runs in ((1, one), (2, two)):
                    if n == 2:
                        procs.append(_start_worker(address))
                        _wait_for_workers(address, 2, root / "warm")
                    watched = [psutil.Process(p.pid) for p in procs]
                    runs.append(cluster_ingest(folder, root / f"wh{n}-{i}", address, watched))
                    alone[n].append(workers_alone(folder, root / f"alone{n}-{i}", address))
                _stop([procs.pop()])
                _wait_for_workers(address, 1, root / "warm")
                s1, s2 = one[-1]["seconds"], two[-1]["seconds"]
                t1, t2 = one[-1]["phases"]["tasks"][0], two[-1]["phases"]["tasks"][0]
                w1, w2 = alone[1][-1], alone[2][-1]
                print(
                    f"round {i + 1} ({_load_line()}): 1 worker {s1:.2f} s, 2 workers {s2:.2f} s, ratio "
                    f"{s1 / s2:.2f}x; tasks phase {t1 / t2:.2f}x; workers alone {w1 / w2:.2f}x"
                )
                print(_phase_line("1 worker ", one[-1], w1))
                print(_phase_line("2 workers", two[-1], w2))
        finally:
            _stop(procs)
    _cluster_summary(one, two, alone)


def pool_startup(repeat: int) -> None:
    """What the local process pool (engine.py) costs to start, use once and close, in a fresh process."""
    runs = [_child_once(_POOL_STARTUP, "") for _ in range(repeat)]
    print(_load_line())
    for r in runs:
        if "error" in r:
            print(f"error: {r['error']}")
            continue
        print(
            f"server started {r['server']:.2f} s, its imports + {r['processes']} workers forked and "
            f"ready {r['workers']:.2f} s, close {r['close']:.2f} s: {r['seconds']:.2f} s in all"
        )


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--big", action="store_true", help="run only the big trace through parse_trace")
    parser.add_argument("--big-path", type=Path, default=Path("/tmp/tracehouse_big_trace.json"))
    parser.add_argument("--repeat", type=int, default=5, help="runs per parser and trace; the fastest counts")
    parser.add_argument("--end-to-end", action="store_true", help="the ingest command vs HTA's load")
    parser.add_argument(
        "--each", action="store_true", help="with --end-to-end: every shared trace of >= 20k events"
    )
    parser.add_argument("--incremental", action="store_true", help="ingest into a full vs an empty warehouse")
    parser.add_argument("--pool-startup", action="store_true", help="the local process pool's start-up")
    parser.add_argument(
        "--cluster", action="store_true", help="ingest on a real dask scheduler: 1 worker vs 2"
    )
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the trace to replicate")
    parser.add_argument(
        "--copies", type=int, default=1, help="copies of the source's timeline per rank (--end-to-end)"
    )
    parser.add_argument(
        "--ranks", type=int, help="ranks to ingest (--end-to-end, --incremental: 8; --cluster: 16)"
    )
    parser.add_argument(
        "--base-ranks", type=int, default=64, help="ranks the warehouse holds (--incremental)"
    )
    args = parser.parse_args()
    repeat = min(args.repeat, 3) if args.repeat == 5 else args.repeat  # the default 5 is for parse timings
    ranks = args.ranks or (16 if args.cluster else 8)
    if args.end_to_end and args.each:
        each(ranks, repeat)
    elif args.end_to_end:
        end_to_end(args.source, ranks, repeat, args.copies)
    elif args.incremental:
        incremental(args.source, args.base_ranks, ranks, repeat)
    elif args.cluster:
        cluster(args.source, ranks, repeat)
    elif args.pool_startup:
        pool_startup(repeat)
    elif args.big:
        big(args.big_path)
    else:
        compare(args.traces or [SHARED / t for t in DEFAULT_TRACES], args.repeat)


if __name__ == "__main__":
    main()
