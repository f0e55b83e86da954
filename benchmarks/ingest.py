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
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

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


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--big", action="store_true", help="run only the big trace through parse_trace")
    parser.add_argument("--big-path", type=Path, default=Path("/tmp/tracehouse_big_trace.json"))
    parser.add_argument("--repeat", type=int, default=5, help="runs per parser and trace; the fastest counts")
    args = parser.parse_args()
    if args.big:
        big(args.big_path)
    else:
        compare(args.traces or [SHARED / t for t in DEFAULT_TRACES], args.repeat)


if __name__ == "__main__":
    main()
