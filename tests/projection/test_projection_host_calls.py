"""Host runtime calls that wait for the device (docs/projection.md "GPU ranks"), on hand-made GPU
traces: a launch blocked on a full launch queue shortens with faster kernels; only synchronous
copies wait for the device."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.tracebuilder import distributed, kernel, runtime, step, write_trace
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.pipeline.projection.build import RunGraph, build_run_graph
from tracehouse.pipeline.projection.graph import Cost
from tracehouse.pipeline.projection.timeline import RunTimeline, load_run
from tracehouse.pipeline.warehouse.reading import open_reader

US = 1000  # ns per µs
QUEUE = 3  # launches the hand-made device queues before a launch blocks
LAUNCH_US = 5


def _replay(tmp_path: Path, events: list[dict]) -> tuple[RunTimeline, RunGraph]:
    """Ingest one rank's trace and build its replay graph."""
    trace = write_trace(tmp_path / "rank0.json", events, distributed_info=distributed(0, 1))
    summary = ingest([trace], tmp_path / "wh", study="s", run="r")
    assert summary.failed == [], summary.failed
    with open_reader(tmp_path / "wh") as con:
        timeline = load_run(con, "s", "r")
    return timeline, build_run_graph(timeline)


def _matmul_weights(run: RunGraph, speedup: float) -> np.ndarray:
    """The measured weights with matmul kernels `speedup` times faster."""
    g = run.graph
    weights = g.measured_weights(run.transfer_ns)
    matmul = g.cost == Cost.COMPUTE_MATMUL
    weights[matmul] = g.fixed[matmul] + g.base[matmul] / speedup
    return weights


def _time_of(run: RunGraph, times: np.ndarray, measured_ns: int) -> float:
    """The replayed time (ns after the run's first instant) of the node measured at `measured_ns`."""
    (node,) = np.flatnonzero(run.graph.measured == measured_ns)
    return float(times[node])


def _gpu_bound(n: int, kernel_us: int) -> list[dict]:
    """n launches of a matmul on one stream; a launch with QUEUE kernels outstanding blocks until
    the oldest ends (and returns 2 µs after), as cudaLaunchKernel does on a full queue."""
    events = [step(1, 0, n * (kernel_us + 10) + 100)]
    host, previous_end, ends = 10, 0, []
    for i in range(n):
        blocked = sum(end > host for end in ends) >= QUEUE
        call_end = ends[i - QUEUE] + 2 if blocked else host + LAUNCH_US
        events.append(runtime("cudaLaunchKernel", host, call_end - host, correlation=i + 1))
        start = max(previous_end, host + 4)
        events.append(kernel("gemm_bf16_kernel", start, kernel_us, correlation=i + 1))
        ends.append(start + kernel_us)
        previous_end = start + kernel_us
        host = call_end + 1
    return events


def test_a_launch_blocked_on_a_full_queue_returns_earlier_with_faster_kernels(tmp_path: Path) -> None:
    n = 12
    timeline, run = _replay(tmp_path, _gpu_bound(n, kernel_us=100))
    measured = run.graph.measured_times()
    np.testing.assert_array_equal(run.graph.replay(run.graph.measured_weights(run.transfer_ns)), measured)
    last_call_end = int(timeline.runtime["end_ns"].max())
    times = run.graph.replay(_matmul_weights(run, 2.0))
    before = _time_of(run, measured, last_call_end)
    after = _time_of(run, times, last_call_end)
    # Each blocked launch returns when the kernel QUEUE launches earlier ends: 50 µs sooner per
    # kernel before it, for the n - QUEUE - 1 kernels that end before the last launch returns.
    assert before - after == pytest.approx((n - QUEUE) * 50 * US, abs=5 * US)
    (step_before,) = run.step_times(measured)[1].values()
    (step_after,) = run.step_times(times)[1].values()
    assert step_after < 0.6 * step_before, (step_before, step_after)


def test_launches_below_the_queue_keep_their_host_time(tmp_path: Path) -> None:
    timeline, run = _replay(tmp_path, _gpu_bound(12, kernel_us=2))  # the queue never fills
    last_call_end = int(timeline.runtime["end_ns"].max())
    times = run.graph.replay(_matmul_weights(run, 2.0))
    assert _time_of(run, times, last_call_end) == _time_of(run, run.graph.measured_times(), last_call_end)


@pytest.mark.parametrize(("copy", "waits"), [("cudaMemcpy", True), ("cudaMemcpyAsync", False)])
def test_only_a_synchronous_copy_waits_for_the_device(tmp_path: Path, copy: str, waits: bool) -> None:
    # a 100 µs matmul launched at 10 µs runs 15-115; the copy call spans its end (an Async copy
    # from pageable memory can take that long too) and its own copy runs 115-117
    events = [
        step(1, 0, 200),
        runtime("cudaLaunchKernel", 10, LAUNCH_US, correlation=1),
        kernel("gemm_bf16_kernel", 15, 100, correlation=1),
        runtime(copy, 20, 98, correlation=2),
        kernel("Memcpy DtoH (Device -> Pageable)", 115, 2, correlation=2, cat="gpu_memcpy"),
    ]
    timeline, run = _replay(tmp_path, events)
    copy_end = int(timeline.runtime.filter(timeline.runtime["name"] == copy)["end_ns"].item())
    measured = _time_of(run, run.graph.measured_times(), copy_end)
    faster = _time_of(run, run.graph.replay(_matmul_weights(run, 2.0)), copy_end)
    assert measured - faster == (50 * US if waits else 0)
