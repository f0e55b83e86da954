"""Markup in every string a trace or manifest can bring into the report, and a real run that carries it."""

from __future__ import annotations

import json
from pathlib import Path

from support.tracebuilder import distributed, kernel, runtime, step, write_trace

# Markup that must stay text wherever a trace or manifest string lands in the page.
HOSTILE = {
    "study": "<script>window.__pwned='study'</script> study",
    "run_id": 'run"><img src=x onerror="window.__pwned=\'run\'">',
    "strategy": "<b>ddp</b>",
    "host": "<iframe src=\"javascript:window.__pwned='host'\"></iframe>",
    "kernel": "</script><script>window.__pwned='kernel'</script>&amp;<!--",
}


def hostile_run(directory: Path) -> Path:
    """A one-rank GPU run whose manifest and kernel names carry markup, written with tracebuilder."""
    directory.mkdir(parents=True, exist_ok=True)
    events = []
    for n, start in enumerate((0, 1000)):
        events += [
            step(n + 1, start, 900),
            runtime("cudaLaunchKernel", start + 10, 5, correlation=2 * n + 1),
            kernel(HOSTILE["kernel"], start + 20, 500, correlation=2 * n + 1),
            runtime("cudaLaunchKernel", start + 30, 5, correlation=2 * n + 2),
            kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", start + 520, 200, correlation=2 * n + 2),
        ]
    write_trace(
        directory / "rank0.pt.trace.json",
        events,
        base_time_ns=1_700_000_000_000_000_000,
        distributed_info=distributed(0, 1),
        device_names=("NVIDIA H100 80GB HBM3",),
    )
    manifest = {
        "study": HOSTILE["study"],
        "run_id": HOSTILE["run_id"],
        "strategy": HOSTILE["strategy"],
        "world_size": 1,
        "dp": 1,
        "global_batch": 4,
        "seq_len": 256,
        "hosts": [HOSTILE["host"]],
        "traces": {"0": "rank0.pt.trace.json"},
        "power": {"source": None, "unavailable_reason": "<svg onload=\"window.__pwned='power'\">"},
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory
