"""Hypothesis: ts/dur written by tracebuilder come back from parse_trace exactly, in ns."""

from __future__ import annotations

import tempfile
from decimal import Decimal
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from support.tracebuilder import cpu_op, write_trace
from tracehouse.pipeline.parsers.kineto.parse import parse_trace

# µs as Kineto writes them: an int, or a float/decimal with up to 3 decimals (ns resolution).
relative_ns = st.integers(min_value=0, max_value=2**43 * 1000 - 1)  # below the float-path limit
absolute_ns = st.integers(min_value=1_500_000_000_000_000_000, max_value=1_900_000_000_000_000_000)
dur_ns = st.integers(min_value=0, max_value=10**12)


def as_written(ns: int, style: str) -> int | float | Decimal:
    if style == "int":
        return ns // 1000
    if style == "float":
        return float(Decimal(ns) / 1000)  # Python's repr: shortest text that round-trips
    return Decimal(ns) / 1000  # every digit written


def expected(ns: int, style: str) -> int:
    return (ns // 1000) * 1000 if style == "int" else ns


@settings(max_examples=40, deadline=None)
@given(
    times=st.lists(st.tuples(relative_ns, dur_ns), min_size=1, max_size=20),
    style=st.sampled_from(["int", "float", "decimal"]),
    base=st.integers(min_value=0, max_value=2 * 10**18),
)
def test_relative_round_trip(times: list[tuple[int, int]], style: str, base: int) -> None:
    events = [cpu_op(f"e{i}", as_written(t, style), as_written(d, style)) for i, (t, d) in enumerate(times)]
    with tempfile.TemporaryDirectory() as tmp:
        ev = parse_trace(write_trace(Path(tmp) / "r.json", events, base_time_ns=base)).events
    assert ev["ts_unix_ns"].to_list() == [base + expected(t, style) for t, _ in times]
    assert ev["dur_ns"].to_list() == [expected(d, style) for _, d in times]


@settings(max_examples=40, deadline=None)
@given(
    times=st.lists(st.tuples(absolute_ns, dur_ns), min_size=1, max_size=20),
    style=st.sampled_from(["int", "decimal"]),
)
def test_absolute_epoch_round_trip(times: list[tuple[int, int]], style: str) -> None:
    events = [cpu_op(f"e{i}", as_written(t, style), as_written(d, style)) for i, (t, d) in enumerate(times)]
    with tempfile.TemporaryDirectory() as tmp:
        ev = parse_trace(write_trace(Path(tmp) / "a.json", events, gz=True)).events
    assert ev["ts_unix_ns"].to_list() == [expected(t, style) for t, _ in times]
    assert ev["dur_ns"].to_list() == [expected(d, style) for _, d in times]
