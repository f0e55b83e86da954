"""Test helper: HTA's own definitions where they differ from tracehouse's (METHODOLOGY cross-check).

Each is an events hook for `parsed_db`, applied to tracehouse's parsed events so that a test
can compare with Holistic Trace Analysis on a trace where one known definition differs.
"""

from __future__ import annotations

import polars as pl

GPU_KINDS = ("kernel", "memcpy", "memset")


def as_hta_sees_it(cause: str):
    """An events hook applying HTA's own definition for one known cause, nothing else."""

    def hook(events: pl.DataFrame, trace) -> pl.DataFrame:
        gpu = pl.col("kind").is_in(GPU_KINDS) & pl.col("stream").is_not_null()
        if cause == "launchless" and trace.steps.height >= 2:
            last_end = (trace.steps["ts_unix_ns"] + trace.steps["dur_ns"]).max()
            launched = pl.col("launch_ts_unix_ns").is_not_null() & (pl.col("launch_ts_unix_ns") <= last_end)
            return events.filter(~gpu | launched)
        if cause == "stream_cpu_op":
            # HTA counts any event carrying a stream id as a GPU (compute) event
            host_with_stream = ~pl.col("kind").is_in(GPU_KINDS) & (pl.col("stream") >= 0)
            return events.with_columns(
                pl.when(host_with_stream).then(pl.lit("kernel")).otherwise(pl.col("kind")).alias("kind")
            )
        return events

    return hook
