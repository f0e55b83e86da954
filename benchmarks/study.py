"""A whole study at scale: N rank traces replicated from a real trace, ingested, queried, reported.

The study has one run per scale point, world sizes N/2, N/4, ..., 1 plus a second run at 1
(N ranks in all), each rank a copy of `--source` (benchmarks/replicate.py: ranks patched,
clocks shifted) with a manifest.json; `--copies K` makes each rank hold K consecutive copies of
the source's step timeline (K times the steps and events per rank). Three phases, each one
`tracehouse` process: `ingest`, `views` (one `tracehouse query` reading every public view in
full) and `report`. Printed per phase: wall seconds, events/s, and the peak RSS of the process
tree (the command and any Dask workers it starts, summed, sampled every 0.1 s). DuckDB's memory
limit is set for every connection (TRACEHOUSE_DUCKDB_MEMORY_LIMIT, `--memory-limit`) so the tree
stays under 6 GB. Everything is written under `--out` (default: a temporary folder, removed
afterwards).

    .venv/bin/python benchmarks/study.py --ranks 64 [--copies 1] [--source TRACE] [--memory-limit 4GB]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from replicate import DEFAULT_SOURCE, SHARED, Replicator

TRACEHOUSE = Path(sys.executable).with_name("tracehouse")
SAMPLE_MANIFEST = (
    Path(__file__).resolve().parents[1] / "sample_traces" / "tiny-cpu-gloo" / "ddp-ws2" / "manifest.json"
)
RSS_LIMIT_GB = 6.0
TOKENS_PER_RANK = 4096  # tokens per step and rank of the made-up workload
PEAK_FLOPS = 1.307e15  # MI300X dense bf16 (the default source is an MI300X trace)
PUBLIC_VIEWS = (
    "runs", "step_breakdown", "rank_summary", "collectives", "collective_instances", "scale_points",
    "step_stragglers", "top_kernels", "trace_coverage", "comm_exposure", "idle_causes",
)  # fmt: skip


def world_sizes(ranks: int) -> list[int]:
    """N/2, N/4, ..., 1, then 1 again: N ranks in all (N a power of two, at least 2)."""
    if ranks < 2 or ranks & (ranks - 1):
        raise SystemExit(f"--ranks {ranks}: give a power of two, at least 2")
    sizes = []
    size = ranks // 2
    while size >= 1:
        sizes.append(size)
        size //= 2
    return [*sizes, 1]


def manifest(run_id: str, world_size: int) -> dict:
    """The run's manifest: the shipped sample's, with this run's facts."""
    facts = json.loads(SAMPLE_MANIFEST.read_text())
    for key in ("traces", "command", "git_commit", "started_at", "ended_at"):
        facts.pop(key, None)
    facts.update(
        study="scale",
        run_id=run_id,
        world_size=world_size,
        dp=world_size,
        nodes=max(1, world_size // 8),
        devices_per_node=min(8, world_size),
        device_type="gpu",
        device_name="AMD Instinct MI300X",
        global_batch=None,
        seq_len=None,
        tokens_per_step=TOKENS_PER_RANK * world_size,
        peak_flops=PEAK_FLOPS,
        hosts=[f"node{i}" for i in range(max(1, world_size // 8))],
    )
    return facts


def build(out: Path, source: Path, ranks: int, copies: int = 1) -> int:
    """Write the study's traces and manifests under out/traces; return its number of events."""
    replicator = Replicator(source, copies=copies)
    for i, size in enumerate(world_sizes(ranks)):
        run_id = f"ddp-ws{size}" if i < len(world_sizes(ranks)) - 1 else f"ddp-ws{size}-again"
        folder = out / "traces" / run_id
        replicator.run(folder, ranks=size, manifest=manifest(run_id, size), offset_ns=i * 10**12)
    return ranks * replicator.n_events


def measured(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run a command; return (wall seconds, peak RSS of its process tree in GB, its stdout)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        root = psutil.Process(process.pid)
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                total = 0
                for p in tree:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
                peak[0] = max(peak[0], total)
            except psutil.Error:
                return
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command[:2])} failed ({process.returncode}): {stderr.strip()[-400:]}")
    return seconds, peak[0] / 1e9, stdout


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--copies", type=int, default=1, help="copies of the source's timeline per rank")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--memory-limit", default="4GB", help="DuckDB's memory_limit for every connection")
    parser.add_argument("--out", type=Path, help="keep everything here (default: a temporary folder)")
    args = parser.parse_args()
    if args.copies < 1:
        raise SystemExit(f"--copies {args.copies}: give at least 1")
    out = args.out or Path(tempfile.mkdtemp(prefix="tracehouse_study_"))
    env = {**os.environ, "TRACEHOUSE_DUCKDB_MEMORY_LIMIT": args.memory_limit}
    warehouse, report = out / "warehouse", out / "report.html"
    try:
        started = time.perf_counter()
        events = build(out, args.source, args.ranks, args.copies)
        print(
            f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.ranks} ranks of "
            f"{args.source.relative_to(SHARED) if args.source.is_relative_to(SHARED) else args.source}"
            f"{f' x {args.copies} timelines' if args.copies > 1 else ''}, "
            f"{events:,} events, runs at world sizes {world_sizes(args.ranks)}; traces written in "
            f"{time.perf_counter() - started:.1f} s; DuckDB memory_limit {args.memory_limit}"
        )
        views_sql = "SELECT " + ", ".join(f"(SELECT count(*) FROM {v}) AS {v}" for v in PUBLIC_VIEWS)
        phases = {
            "ingest": [str(TRACEHOUSE), "ingest", str(out / "traces"), "--warehouse", str(warehouse)],
            "views": [str(TRACEHOUSE), "query", views_sql, "--warehouse", str(warehouse), "--format", "json"],
            "report": [str(TRACEHOUSE), "report", "--warehouse", str(warehouse), "-o", str(report)],
        }
        print(f"{'phase':<8}{'wall s':>9}{'events/s':>14}{'peak RSS GB':>13}")
        worst = 0.0
        for name, command in phases.items():
            seconds, rss_gb, stdout = measured(command, env)
            worst = max(worst, rss_gb)
            print(f"{name:<8}{seconds:>9.2f}{events / seconds:>14,.0f}{rss_gb:>13.2f}")
            if name == "views":
                counts = json.loads(stdout)[0]
                print("         rows: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
        size_mb = report.stat().st_size / 1e6
        print(
            f"report: {size_mb:.2f} MB ({'under' if size_mb < 5 else 'OVER'} 5 MB); peak RSS {worst:.2f} GB "
            f"({'under' if worst < RSS_LIMIT_GB else 'OVER'} {RSS_LIMIT_GB:g} GB)"
        )
    finally:
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
