"""The CPU rule's compute (main-thread self time of the innermost open event) against a brute-force oracle.

Generated call trees include calls that do not nest perfectly, equal starts and equal ends, so
both the fast path (a perfectly nested tree) and the general path are exercised.
"""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.analysis_rawdb import create_views, ev, fill, rows, step

HORIZON = 60  # µs, integer grid
KINDS = [("cpu_op", "aten::mm"), ("cpu_op", "c10d::allreduce_"), ("user_annotation", "Forward 0")]

pytestmark = pytest.mark.slow

CON = duckdb.connect()
fill(CON)
create_views(CON)


def oracle_compute_us(events: list[dict]) -> float:
    """Count 1 µs cells whose innermost open call (started last; ties: ends first, then cpu_op) computes."""
    ordered = sorted(
        events, key=lambda e: (e["ts_unix_ns"], -e["dur_ns"], e["name"] == "aten::mm")
    )  # the last open one in this order is the innermost
    total = 0
    for t in range(HORIZON):
        t_ns = t * 1000
        open_ = [e for e in ordered if e["ts_unix_ns"] <= t_ns < e["ts_unix_ns"] + e["dur_ns"]]
        total += bool(open_) and open_[-1]["name"] == "aten::mm"
    return float(total)


@st.composite
def call_tree(draw) -> list[dict]:
    """Random intervals on the main thread: nested, crossing, touching, tied."""
    events = [ev("user_annotation", "ProfilerStep#1", 0, HORIZON)]
    for _ in range(draw(st.integers(0, 10))):
        kind, name = draw(st.sampled_from(KINDS))
        start = draw(st.integers(0, HORIZON - 1))
        events.append(ev(kind, name, start, draw(st.integers(1, HORIZON - start))))
    return events


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call_tree())
def test_cpu_compute_is_the_innermost_compute_self_time(events):
    fill(CON, steps=[step(1, 0, HORIZON)], events=events)
    got = rows(CON, "SELECT compute_us FROM step_breakdown")
    assert got == [{"compute_us": oracle_compute_us(events)}]
