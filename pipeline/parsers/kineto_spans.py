"""Interval lookups between events of one thread, vectorised (an as-of join, no Python loop)."""

from __future__ import annotations

import polars as pl


def enclosing(inner: pl.DataFrame, at: str, outer: pl.DataFrame, prefix: str) -> pl.DataFrame:
    """For each inner row, the latest-starting outer event on the same (pid, tid) whose span holds `at`.

    The outer columns come back prefixed (`{prefix}ts`, `{prefix}end`, `{prefix}<col>`), NULL
    where no outer event holds `at`. Nested outer events resolve to the innermost one that
    started last, which is the enclosing one whenever the outer events nest properly.
    """
    right = outer.select(
        "pid",
        "tid",
        pl.col("ts_unix_ns").alias(f"{prefix}ts"),
        (pl.col("ts_unix_ns") + pl.col("dur_ns")).alias(f"{prefix}end"),
        *[pl.col(c).alias(prefix + c) for c in outer.columns if c not in ("pid", "tid", "ts_unix_ns")],
    ).sort(f"{prefix}ts")
    joined = inner.sort(at).join_asof(
        right,
        left_on=at,
        right_on=f"{prefix}ts",
        by=["pid", "tid"],
        strategy="backward",
        check_sortedness=False,
    )
    inside = pl.col(at) <= pl.col(f"{prefix}end")
    payload = [c for c in right.columns if c not in ("pid", "tid")]
    return joined.with_columns([pl.when(inside).then(pl.col(c)).alias(c) for c in payload])
