"""STEPS: `ProfilerStep#N` annotations on the rank's training-loop thread.

Rules: only host events count (any host category: `user_annotation`, `cpu_op`, `Operator`;
the `gpu_user_annotation` copies on GPU streams are not steps). The loop thread is the
(pid, tid) that holds the most such events (ties: the one whose first step starts first).
A step number that appears twice on that thread keeps its earliest event.
"""

from __future__ import annotations

import polars as pl
from tracehouse.pipeline.schema import STEPS

STEP_PATTERN = r"^ProfilerStep#(\d+)$"
DEVICE_KINDS = ("kernel", "memcpy", "memset", "gpu_user_annotation", "cuda_sync")


def step_number(name: pl.Expr) -> pl.Expr:
    """N of a `ProfilerStep#N` name, else NULL (evaluated once per unique name by the scanner path)."""
    return name.str.extract(STEP_PATTERN, 1).cast(pl.Int64, strict=False)


def steps_frame(events: pl.DataFrame) -> pl.DataFrame:
    """One row per step of the loop thread, in step order (`events._step`: see step_number)."""
    steps = events.filter(pl.col("_step").is_not_null() & ~pl.col("kind").is_in(DEVICE_KINDS)).rename(
        {"_step": "step"}
    )
    if steps.is_empty():
        return pl.DataFrame(schema=STEPS)
    loop = (
        steps.group_by("pid", "tid")
        .agg(pl.len().alias("n"), pl.col("ts_unix_ns").min().alias("first"))
        .sort(["n", "first"], descending=[True, False])
        .row(0, named=True)
    )
    return (
        steps.filter((pl.col("pid") == loop["pid"]) & (pl.col("tid") == loop["tid"]))
        .sort("ts_unix_ns")
        .unique("step", keep="first", maintain_order=True)
        .sort("step")
        .select([pl.col(c).cast(t) for c, t in STEPS.items()])
    )
