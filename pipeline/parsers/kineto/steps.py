"""STEPS: `ProfilerStep#N` annotations on the rank's training-loop thread.

Rules: only host events count (any host category: `user_annotation`, `cpu_op`, `Operator`;
the `gpu_user_annotation` copies on GPU streams are not steps). The loop thread is the
(pid, tid) that holds the most such events (ties: the one whose first step starts first).
A step number that appears twice on that thread keeps its earliest event.
"""

from __future__ import annotations

import polars as pl
from tracehouse.pipeline.warehouse.schema import STEPS

DEVICE_KINDS = ("kernel", "memcpy", "memset", "gpu_user_annotation", "cuda_sync")


def steps_frame(events: pl.DataFrame) -> pl.DataFrame:
    """One row per step of the loop thread, in step order (`events._step`: see names.step_number).

    One Polars filter finds the step annotations; the rest is plain Python over those few rows
    (one per step per thread), cheaper than a chain of Polars queries on a tiny frame.
    """
    steps = events.filter(pl.col("_step").is_not_null())
    rows = [
        r[:5]
        for r in steps.select("_step", "ts_unix_ns", "dur_ns", "pid", "tid", "kind").rows()
        if r[5] not in DEVICE_KINDS
    ]
    if not rows:
        return pl.DataFrame(schema=STEPS)
    loop = _loop_thread(rows)
    first: dict[int, tuple] = {}
    for row in sorted((r for r in rows if (r[3], r[4]) == loop), key=lambda r: r[1]):
        first.setdefault(row[0], row)
    return pl.DataFrame([first[step] for step in sorted(first)], schema=STEPS, orient="row")


def _loop_thread(rows: list[tuple]) -> tuple[str | None, str | None]:
    """The (pid, tid) holding the most steps; ties: the one whose first step starts first."""
    count: dict[tuple, int] = {}
    start: dict[tuple, int] = {}
    for _, ts, _, pid, tid in rows:
        count[pid, tid] = count.get((pid, tid), 0) + 1
        start[pid, tid] = min(ts, start.get((pid, tid), ts))
    return min(count, key=lambda thread: (-count[thread], start[thread]))
