"""launch_stats: launch-to-start delays per rank, by hand and against HTA's get_cuda_kernel_launch_stats.

Every trace is a Kineto file read by the real parser.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from support.analysis_rawdb import parsed_db, rows
from support.testdata import shared_path
from support.tracebuilder import kernel, runtime, step, write_trace
from tracehouse.pipeline.parsers.kineto.parse import parse_trace

BASE = 1_700_000_000 * 10**9


def test_by_hand(tmp_path):
    events = [
        step(1, 0, 200),
        # launched at 10 for 4 µs, starts at 20 for 30 µs: delay 10, after the call 6
        runtime("cudaLaunchKernel", 10, 4, correlation=1),
        kernel("gemm", 20, 30, correlation=1),
        # launched at 50 for 8 µs, runs 52-54: delay 2, after the call 0 (clipped), shorter than its launch
        runtime("cudaLaunchKernel", 50, 8, correlation=2),
        kernel("relu", 52, 2, correlation=2),
        # a copy launched at 60 for 5 µs, runs 90-100: delay 30, after the call 25
        runtime("cudaMemcpyAsync", 60, 5, correlation=3),
        kernel("Memcpy HtoD", 90, 10, correlation=3, cat="gpu_memcpy"),
        # its launch is not in the trace
        kernel("gemm", 120, 5, correlation=99),
    ]
    path = write_trace(tmp_path / "rank0.json", events, base_time_ns=BASE)
    con = parsed_db([(parse_trace(path), {"study": "s", "run_id": "r", "rank": 0})])
    (got,) = rows(con, "SELECT * EXCLUDE (study, run_id) FROM launch_stats")
    # delays 2, 10, 30: p90 at position 0.9 x 2 = 1.8 -> 10 + 0.8 x 20; p99 at 1.98 -> 10 + 0.98 x 20
    assert got == {
        "rank": 0,
        "launched": 3,
        "launchless": 1,
        "delay_p50_us": 10.0,
        "delay_p90_us": pytest.approx(26.0),
        "delay_p99_us": pytest.approx(29.6),
        "delay_max_us": 30.0,
        "delay_mean_us": 14.0,
        "after_call_mean_us": pytest.approx(31 / 3),
        "after_call_max_us": 25.0,
        "shorter_than_launch": 1,
        "shorter_share": pytest.approx(1 / 3),
    }


def hta_launch_stats(path: Path):
    """HTA's per-launch frame (correlation, cpu_duration, gpu_duration, launch_delay) of a one-rank trace."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(path, Path(tmp) / path.name)
        analysis = TraceAnalysis(trace_dir=tmp, include_last_profiler_step=True)
        rank = next(iter(analysis.t.traces))
        return analysis.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]


# Traces whose launches are all cudaLaunchKernel, cudaMemcpyAsync or cudaMemsetAsync: HTA knows only
# those (and cudaLaunchKernelExC); tracelens/h100_bert_small.json.gz, whose launches include other
# runtime calls, and the ROCm traces (hipLaunchKernel) get fewer or no launches from HTA.
@pytest.mark.shared_data
@pytest.mark.slow
@pytest.mark.parametrize(
    "rel",
    [
        "hta/pair_sampled_rank-0.json.gz",
        "kineto/resnet50_v100_2021.pt.trace.json.gz",
        "param/linear_rtx2080ti.json.gz",
    ],
)
def test_agrees_with_hta_launch_stats(rel):
    path = shared_path(f"traces/{rel}")
    hta = hta_launch_stats(path)
    con = parsed_db([(parse_trace(path), {"study": "s", "run_id": "r", "rank": 0})])
    (got,) = rows(con, "SELECT * FROM launch_stats")
    assert got["launched"] == len(hta) and got["launchless"] == 0
    assert got["shorter_than_launch"] == int((hta["gpu_duration"] < hta["cpu_duration"]).sum())
    assert got["after_call_mean_us"] == pytest.approx(hta["launch_delay"].mean(), abs=1e-6)
    assert got["after_call_max_us"] == pytest.approx(hta["launch_delay"].max(), abs=1e-6)
