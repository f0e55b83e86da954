"""The enclosing-span rule (`kineto_spans.holders`) against a brute-force oracle."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from tracehouse.pipeline.parsers.kineto.spans import holders

THREADS = st.sampled_from([("1", "1"), ("1", "2"), ("2", "1"), (None, None)])
TIMES = st.integers(min_value=-(2**62), max_value=2**62) | st.integers(min_value=0, max_value=20)
SPANS = st.lists(st.tuples(THREADS, TIMES, st.integers(min_value=0, max_value=10)), max_size=12)
POINTS = st.lists(st.tuples(THREADS, TIMES), max_size=12)


def oracle(points: list, spans: list) -> list[int | None]:
    """Of the spans on the point's thread starting at or before it, the last-starting one (of
    equal starts, the later index), if it still runs at the point."""
    found = []
    for thread, at in points:
        started = [(start, i) for i, (t, start, _) in enumerate(spans) if t == thread and start <= at]
        if not started:
            found.append(None)
            continue
        _, i = max(started)
        found.append(i if at <= spans[i][1] + spans[i][2] else None)
    return found


@given(points=POINTS, spans=SPANS)
def test_holders_match_the_oracle(points: list, spans: list) -> None:
    start = np.array([s for _, s, _ in spans], dtype=np.int64)
    got = holders(
        [t for t, _ in points],
        np.array([at for _, at in points], dtype=np.int64),
        [t for t, _, _ in spans],
        start,
        start + np.array([d for _, _, d in spans], dtype=np.int64),
    )
    assert got.tolist(None) == oracle(points, spans)


def test_nested_spans_resolve_to_the_innermost() -> None:
    start = np.array([0, 10, 12], dtype=np.int64)
    end = np.array([100, 50, 20], dtype=np.int64)
    threads = [("p", "t")] * 3
    got = holders([("p", "t")] * 4, np.array([5, 15, 30, 200]), threads, start, end)
    assert got.tolist(None) == [0, 2, None, None]  # 30: the last-started (12..20) has ended
