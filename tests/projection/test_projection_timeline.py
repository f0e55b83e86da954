"""The op each CPU compute segment is the self time of (timeline.innermost_calls): a sweep against
the containment rule stated as brute force, on generated calls (nested or not) and on the sample
study's SQL range join."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from tracehouse.pipeline.projection.timeline import QUERIES, RUN_FILTER, innermost_calls
from tracehouse.pipeline.warehouse.reading import open_reader

STUDY = "tiny-cpu-gloo"


def _oracle(segments: pl.DataFrame, calls: pl.DataFrame) -> list[tuple]:
    """Per segment, every call of its rank that holds it, the latest start first, then the earliest
    end, then the highest op_id: the first one's name and op_id."""
    out = []
    for rank, start, end in segments.select("rank", "start_ns", "end_ns").iter_rows():
        holding = [
            (s, -e, op_id, name)
            for r, s, e, name, op_id in calls.iter_rows()
            if r == rank and s <= start and e >= end
        ]
        best = max(holding, default=None)
        out.append((rank, start, end, None if best is None else best[3], None if best is None else best[2]))
    return out


@st.composite
def _calls_and_segments(draw) -> tuple[pl.DataFrame, pl.DataFrame]:
    calls, segments = [], []
    for rank in range(draw(st.integers(1, 3))):
        for op_id in range(draw(st.integers(0, 12))):
            start = draw(st.integers(0, 60))
            calls.append(
                (rank, start, start + draw(st.integers(1, 40)), f"op{op_id % 4}", rank * 100 + op_id)
            )
        # disjoint segments in start order, as the CPU rule cuts a main thread
        cuts = sorted(draw(st.sets(st.integers(0, 110), max_size=16)))
        keep = draw(st.lists(st.booleans(), min_size=len(cuts), max_size=len(cuts)))
        segments += [(rank, a, b) for a, b, k in zip(cuts, cuts[1:], keep, strict=False) if k]
    schema = {"rank": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64}
    call_frame = pl.DataFrame(calls, schema={**schema, "name": pl.String, "op_id": pl.Int64}, orient="row")
    return pl.DataFrame(segments, schema=schema, orient="row"), call_frame.sample(fraction=1.0, shuffle=True)


@settings(max_examples=300, deadline=None)
@given(_calls_and_segments())
def test_each_segment_gets_the_innermost_call_that_holds_it(drawn: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    segments, calls = drawn
    got = innermost_calls(segments, calls)
    assert got.columns == ["rank", "start_ns", "end_ns", "name", "op_id"]
    assert list(got.iter_rows()) == _oracle(segments, calls)


# The rule as the SQL range join it replaced: every cpu_op of the main thread holding the segment,
# the latest start, then the earliest end.
RANGE_JOIN = f"""
    WITH calls AS ({QUERIES["main_calls"]})
    SELECT s.rank, s.start_ns, s.end_ns,
           arg_max(c.name, struct_pack(started := c.start_ns, ends := -c.end_ns)) AS name,
           arg_max(c.op_id, struct_pack(started := c.start_ns, ends := -c.end_ns)) AS op_id
    FROM cpu_compute_segments AS s
    LEFT JOIN calls AS c ON c.rank = s.rank AND c.start_ns <= s.start_ns AND c.end_ns >= s.end_ns
    WHERE s.{RUN_FILTER.replace(" AND ", " AND s.")}
    GROUP BY s.rank, s.start_ns, s.end_ns
    ORDER BY s.rank, s.start_ns"""


def test_the_sweep_equals_the_range_join_on_the_sample_study(sample_warehouse: Path) -> None:
    params = {"study": STUDY, "run_id": "fsdp-ws2"}
    with open_reader(sample_warehouse) as con:
        joined = con.sql(RANGE_JOIN, params=params).pl()
        swept = innermost_calls(
            con.sql(QUERIES["cpu_compute"], params=params).pl(),
            con.sql(QUERIES["main_calls"], params=params).pl(),
        )
    assert joined.height > 30_000 and joined["op_id"].null_count() == 0
    assert swept.equals(joined)
