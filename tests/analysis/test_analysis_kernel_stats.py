"""kernel_stats: per-kernel call distribution across ranks, by hand, against a brute-force oracle, and HTA.

Quantiles are DuckDB's quantile_cont: linear interpolation between the nearest order statistics,
which is numpy's default method ('linear'); std_us is the sample standard deviation (n - 1).
Every trace here is written as a Kineto file and read by the real parser.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.analysis_rawdb import parsed_db, rows
from support.hta_definitions import as_hta_sees_it
from support.testdata import shared_path
from support.tracebuilder import kernel, runtime, step, write_trace
from tracehouse.pipeline.parsers.kineto.parse import parse_trace

BASE = 1_700_000_000 * 10**9
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def ingest(folder: Path, ranks: list[list[dict]]) -> object:
    """Write one trace per rank, parse each with the real parser, and build the views over them."""
    parsed = []
    for rank, events in enumerate(ranks):
        path = write_trace(folder / f"rank{rank}.json", events, base_time_ns=BASE)
        parsed.append((parse_trace(path), {"study": "s", "run_id": "r", "rank": rank}))
    return parsed_db(parsed)


def gpu(name: str, start: float, dur: float, corr: int, cat: str = "kernel") -> list[dict]:
    """A launch and the GPU event it launched."""
    return [
        runtime("cudaLaunchKernel", start - 1, 1, correlation=corr),
        kernel(name, start, dur, correlation=corr, cat=cat),
    ]


def test_by_hand(tmp_path):
    # rank 0: gemm 10, 20, 60 µs, an NCCL kernel 5 µs and a copy (not a kernel); rank 1: gemm 40 µs
    rank0 = [step(1, 0, 300)]
    for corr, (start, dur) in enumerate([(10, 10), (30, 20), (60, 60)], start=1):
        rank0 += gpu("gemm", start, dur, corr)
    rank0 += gpu(NCCL, 130, 5, 4) + gpu("Memcpy HtoD", 140, 3, 5, cat="gpu_memcpy")
    rank1 = [step(1, 0, 300), *gpu("gemm", 10, 40, 1)]
    con = ingest(tmp_path, [rank0, rank1])
    got = rows(con, "SELECT * FROM kernel_stats ORDER BY kernel")
    assert [r["kernel"] for r in got] == ["gemm", NCCL]  # the copy is not a kernel
    gemm = got[0]
    # sorted 10, 20, 40, 60: p50 = (20 + 40) / 2; p90 at position 0.9 x 3 = 2.7: 40 + 0.7 x 20
    assert {k: gemm[k] for k in ("ranks", "calls", "total_us", "p50_us", "max_us", "slowest_rank")} == {
        "ranks": 2,
        "calls": 4,
        "total_us": 130.0,
        "p50_us": 30.0,
        "max_us": 60.0,
        "slowest_rank": 0,
    }
    assert gemm["p90_us"] == pytest.approx(54.0) and gemm["p99_us"] == pytest.approx(59.4)
    # mean 32.5; squared deviations 506.25 + 156.25 + 56.25 + 756.25 = 1475, over n - 1 = 3
    assert gemm["std_us"] == pytest.approx(math.sqrt(1475 / 3))
    assert (gemm["slowest_rank_us"], gemm["fastest_rank_us"]) == (90.0, 40.0)
    nccl = got[1]
    assert (nccl["calls"], nccl["p50_us"], nccl["p99_us"], nccl["std_us"]) == (1, 5.0, 5.0, None)


@st.composite
def traces(draw) -> list[list[tuple[str, int, int]]]:
    """1-3 ranks, each a few (name, start ns, duration ns) kernels on one stream."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        calls, t = [], 1000
        for _ in range(draw(st.integers(0, 8))):
            dur = draw(st.integers(0, 50_000))
            calls.append((draw(st.sampled_from("abc")), t, dur))
            t += dur + draw(st.integers(0, 3000))
        out.append(calls)
    return out


def oracle(ranks: list[list[tuple[str, int, int]]]) -> dict[str, dict]:
    """kernel_stats computed directly from the durations."""
    out = {}
    for name in sorted({n for calls in ranks for n, _, _ in calls}):
        per_rank = {r: [d for n, _, d in calls if n == name] for r, calls in enumerate(ranks)}
        totals = {r: sum(ds) for r, ds in per_rank.items() if ds}
        pooled = [d for ds in per_rank.values() for d in ds]
        out[name] = {
            "ranks": len(totals),
            "calls": len(pooled),
            "total_us": sum(pooled) / 1e3,
            **{f"p{q}_us": float(np.quantile(pooled, q / 100, method="linear")) / 1e3 for q in (50, 90, 99)},
            "max_us": max(pooled) / 1e3,
            "std_us": statistics.stdev(pooled) / 1e3 if len(pooled) > 1 else None,
            "slowest_rank": min(totals, key=lambda r: (-totals[r], r)),
            "slowest_rank_us": max(totals.values()) / 1e3,
            "fastest_rank_us": min(totals.values()) / 1e3,
        }
    return out


@settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_equals_a_brute_force_oracle(ranks):
    events = [
        [e for i, (name, t, dur) in enumerate(calls) for e in gpu(name, t / 1e3, dur / 1e3, i + 1)]
        for calls in ranks
    ]
    with tempfile.TemporaryDirectory() as tmp:
        con = ingest(Path(tmp), [[step(1, 0, 10_000), *evs] for evs in events])
        got = {r.pop("kernel"): r for r in rows(con, "SELECT * FROM kernel_stats")}
    want = oracle(ranks)
    assert got.keys() == want.keys()
    for name, expected in want.items():
        row = {k: v for k, v in got[name].items() if k not in ("study", "run_id")}
        std, want_std = row.pop("std_us"), expected.pop("std_us")
        assert row == pytest.approx(expected, rel=1e-9, abs=1e-9), name
        assert (std is None and want_std is None) or std == pytest.approx(want_std, rel=1e-9, abs=1e-9)


def hta_kernels(paths: list[Path]):
    """HTA's per-rank kernel breakdown (every kernel, none grouped into 'other')."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            os.symlink(path, Path(tmp) / path.name)
        analysis = TraceAnalysis(trace_dir=tmp, include_last_profiler_step=True)
        _, frame = analysis.get_gpu_kernel_breakdown(
            visualize=False, duration_ratio=1.0, num_kernels=10**9, include_memory_kernels=False
        )
    return frame


@pytest.mark.shared_data
@pytest.mark.slow
@pytest.mark.parametrize(
    ("rels", "cause"),
    [
        (["hta/pair_sampled_rank-0.json.gz", "hta/pair_sampled_rank-1.json.gz"], None),  # two ranks of a job
        # rank 0 of the 8-rank MI300X DDP run: HTA drops the launch-less kernels (METHODOLOGY cross-check)
        (["tracelens/mi300_ddp_rank0_of8.json.gz"], "launchless"),
    ],
    ids=["pair_sampled", "mi300_ddp"],
)
def test_agrees_with_hta_kernel_breakdown(rels, cause):
    paths = [shared_path(f"traces/{rel}") for rel in rels]
    hta = hta_kernels(paths)
    parsed = [(parse_trace(p), {"study": "s", "run_id": "r", "rank": r}) for r, p in enumerate(paths)]
    con = parsed_db(parsed, events_hook=as_hta_sees_it(cause) if cause else None)
    ours = {r["kernel"]: r for r in rows(con, "SELECT * FROM kernel_stats")}
    if cause:  # the cause is real: without HTA's definition some kernel's total differs
        direct = rows(parsed_db(parsed), "SELECT kernel, total_us FROM kernel_stats")
        assert any(
            abs(r["total_us"] - ours[r["kernel"]]["total_us"]) > 1 for r in direct if r["kernel"] in ours
        )
    assert set(hta["name"]) == set(ours)
    for name, group in hta.groupby("name"):
        row, sums = ours[name], group.set_index("rank")["sum (us)"]
        calls = (
            (group["sum (us)"] / group["mean (us)"]).round().sum() if (group["mean (us)"] > 0).all() else None
        )
        assert row["ranks"] == len(group)
        assert row["total_us"] == pytest.approx(sums.sum(), abs=1e-3)
        assert row["max_us"] == pytest.approx(group["max (us)"].max(), abs=1e-3)
        assert row["slowest_rank_us"] == pytest.approx(sums.max(), abs=1e-3)
        assert row["fastest_rank_us"] == pytest.approx(sums.min(), abs=1e-3)
        assert sums[row["slowest_rank"]] == pytest.approx(sums.max(), abs=1e-3)
        assert calls is None or row["calls"] == calls
        if len(group) == 1:  # one rank: the pooled deviation is HTA's (which writes 0 for one call)
            assert (row["std_us"] or 0.0) == pytest.approx(group["stddev"].iloc[0], rel=1e-6, abs=1e-6)
