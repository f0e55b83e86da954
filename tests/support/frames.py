"""Summaries of a parsed events frame that parser tests compare with literals read from the raw JSON."""

from __future__ import annotations

import polars as pl


def kinds(events: pl.DataFrame) -> dict[str, int]:
    """Events per kind."""
    return dict(events.group_by("kind").len().sort("kind").iter_rows())


def gpu_count(events: pl.DataFrame) -> int:
    """Device events (kernel, memcpy, memset with a stream)."""
    return events.filter(
        pl.col("kind").is_in(["kernel", "memcpy", "memset"]) & pl.col("stream").is_not_null()
    ).height


def span(events: pl.DataFrame) -> tuple[int, int]:
    """First start and last end, ns."""
    return events["ts_unix_ns"].min(), (events["ts_unix_ns"] + events["dur_ns"]).max()
