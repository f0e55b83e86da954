"""Hypothesis invariants of the breakdown over generated interval sets, with a brute-force oracle."""

from __future__ import annotations

import itertools

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.analysis_rawdb import create_views, ev, fill, kernel, rows, step

NAMES = {"compute": "gemm", "comm": "ncclKernel_AllReduce", "memory": "Memcpy HtoD"}
HORIZON = 200  # µs; intervals live on an integer-µs grid so the oracle can count unit cells


@st.composite
def gpu_rank(draw, rank: int) -> tuple[list[dict], list[dict]]:
    """Steps on the host and GPU events with launches in them (or none), for one rank."""
    n_steps = draw(st.integers(0, 3))
    steps = [step(i + 1, 40 * i, 40, rank=rank) for i in range(n_steps)]
    events = []
    for _ in range(draw(st.integers(1, 12))):
        klass = draw(st.sampled_from(sorted(NAMES)))
        start = draw(st.integers(0, HORIZON - 1))
        dur = draw(st.integers(0, 40))
        launch = draw(st.one_of(st.none(), st.integers(0, 130)))
        if klass == "memory":
            events.append(
                ev(
                    "memcpy",
                    NAMES[klass],
                    start,
                    dur,
                    stream=draw(st.integers(1, 3)),
                    launch_us=launch,
                    rank=rank,
                )
            )
        else:
            events.append(
                kernel(NAMES[klass], start, dur, stream=draw(st.integers(1, 3)), launch_us=launch, rank=rank)
            )
    return steps, events


def oracle(events: list[dict], start_ns: int, window_ns: int) -> dict:
    """Unit-cell counting over [start, start+window) on the 1 µs grid."""
    a, b = start_ns // 1000, (start_ns + window_ns) // 1000
    cells = {k: np.zeros(HORIZON + 50, dtype=bool) for k in NAMES}
    for e in events:
        klass = "memory" if e["kind"] == "memcpy" else ("comm" if "nccl" in e["name"] else "compute")
        s = e["ts_unix_ns"] // 1000
        cells[klass][s : s + e["dur_ns"] // 1000] = True
    c, m, o = (cells[k][a:b] for k in ("compute", "comm", "memory"))
    return {
        "compute_us": float(c.sum()),
        "comm_us": float(m.sum()),
        "exposed_comm_us": float((m & ~c).sum()),
        "other_us": float((o & ~c & ~m).sum()),
        "idle_us": float((~(c | m | o)).sum()),
    }


pytestmark = pytest.mark.slow  # about 45 s on 2 busy cores

CON = duckdb.connect()
fill(CON)
create_views(CON)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(gpu_rank(0), gpu_rank(1)))
def test_breakdown_invariants(ranks):
    steps = [s for r in ranks for s in r[0]]
    events = [e for r in ranks for e in r[1]]
    fill(CON, steps=steps, events=events)
    got = rows(CON, "SELECT * FROM window_breakdown ORDER BY rank, window_no")  # window_no: tiling order
    for w in got:
        # the identity, in integer ns
        assert w["compute_ns"] + w["exposed_comm_ns"] + w["other_ns"] + w["idle_ns"] == w["window_ns"]
        assert 0 <= w["overlapped_comm_ns"] <= min(w["comm_ns"], w["compute_ns"])
        assert min(w["compute_ns"], w["comm_ns"], w["exposed_comm_ns"], w["other_ns"], w["idle_ns"]) >= 0
        mine = [e for e in events if e["rank"] == w["rank"]]
        expect = oracle(mine, w["start_ns"], w["window_ns"])
        assert {k: w[k.replace("_us", "_ns")] / 1000 for k in expect} == expect
    for rank in (0, 1):
        windows = [
            (w["start_ns"], w["start_ns"] + w["window_ns"])
            for w in got
            if w["rank"] == rank and w["scope"] == "step"
        ]
        # the step windows of a rank tile one stretch of its device timeline
        assert all(end == nxt for (_, end), (nxt, _) in itertools.pairwise(windows))
        trace = [w for w in got if w["rank"] == rank and w["scope"] == "trace"]
        if windows:
            assert (
                trace[0]["start_ns"] <= windows[0][0]
                and windows[-1][1] <= trace[0]["start_ns"] + trace[0]["window_ns"]
            )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 9), st.integers(1, 2_000_000), st.integers(1, 10**9)), min_size=1, max_size=8
    ),
    st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send"]),
)
def test_busbw_at_most_twice_algbw(calls, op):
    collectives = [
        {
            "op": op,
            "process_group": "0",
            "seq": 0,
            "bytes": nbytes,
            "group_size": len(calls),
            "ts_unix_ns": 1000 * rank,
            "dur_ns": dur,
            "rank": rank,
        }
        for rank, (_, dur, nbytes) in enumerate(calls)
    ]
    fill(CON, collectives=collectives)
    for r in rows(CON, "SELECT algbw_gbps, busbw_gbps, wait_us, transfer_us FROM collective_instances"):
        assert r["busbw_gbps"] <= 2 * r["algbw_gbps"]
        assert r["wait_us"] >= 0 and r["transfer_us"] == min(d for _, d, _ in calls) / 1000
