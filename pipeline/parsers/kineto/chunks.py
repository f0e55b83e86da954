"""The msgspec path of `parse_trace`: events decoded in batches of typed Structs into EventRows.

The events array is split into raw JSON slices and decoded CHUNK_EVENTS at a time, so
per-event Python objects exist for one batch at a time. This path handles every input
(and words every error); the C scanner (`fastscan`) is the fast path in front of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import polars as pl
from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.parsers.kineto import decode as dec
from tracehouse.pipeline.parsers.kineto.commargs import comm_args_frame
from tracehouse.pipeline.parsers.kineto.events import (
    NO_EVENTS,
    EventRows,
    meta_rows,
    raw_columns,
    with_ns,
)
from tracehouse.pipeline.parsers.kineto.memory import MEMORY_NAME
from tracehouse.pipeline.parsers.kineto.names import with_facts
from tracehouse.pipeline.parsers.kineto.timestamps import needs_text_path, text_to_ns

CHUNK_EVENTS = 100_000  # decoded per batch: bounds the per-event Python objects alive at once


@dataclass(kw_only=True)
class _Columns:
    """What the chunks of one trace accumulate."""

    raw: list[pl.DataFrame] = field(default_factory=list)
    exact: list[tuple[pl.Series, pl.Series] | None] = field(default_factory=list)
    comm_args: list[pl.DataFrame] = field(default_factory=list)
    metas: list[Any] = field(default_factory=list)
    loose: bool = False
    invalid_utf8: bool = False
    memory: bool = False


def chunk_rows(path: Path, events: Any, *, invalid_utf8: bool) -> EventRows:
    """Decode the traceEvents JSON array in batches; `invalid_utf8`: the top level was replaced."""
    raws, split_replaced = dec.split_events(path, events)
    cols = _Columns(invalid_utf8=invalid_utf8 or split_replaced)
    for start in range(0, len(raws), CHUNK_EVENTS):
        _read_chunk(path, raws[start : start + CHUNK_EVENTS], start, cols)
    del raws
    if not cols.raw or sum(f.height for f in cols.raw) == 0:
        raise TraceFormatError(path, NO_EVENTS)
    raw = pl.concat(cols.raw, how="vertical").with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row")
    )
    ts_ns, dur_ns = _concat_exact(cols.exact, [f.height for f in cols.raw])
    return EventRows(
        raw=with_ns(raw, ts_ns, dur_ns),
        comm_args=pl.concat(cols.comm_args, how="vertical"),
        metas=meta_rows(cols.metas, cols.loose),
        loose=cols.loose,
        invalid_utf8=cols.invalid_utf8,
        decoder="loose" if cols.loose else "typed",
        memory=cols.memory,
    )


def _read_chunk(path: Path, raws: list[Any], first_event: int, cols: _Columns) -> None:
    """Decode one batch of events (from traceEvents[first_event]) into columns; its objects die on return."""
    joined = dec.join_events(raws)
    events, loose, chunk = dec.decode_chunk(path, joined, first_event)
    cols.loose |= loose
    cols.invalid_utf8 |= chunk is not joined
    xs = [e for e in events if e.ph == "X"]
    cols.metas.extend(e for e in events if e.ph == "M")
    cols.memory = cols.memory or MEMORY_NAME in set(map(attrgetter("name"), events))
    raw = with_facts(raw_columns(path, xs, loose))
    offset = sum(f.height for f in cols.raw)
    cols.comm_args.append(comm_args_frame(xs, raw).with_columns(pl.col("_row") + offset))
    cols.raw.append(raw)
    exact = needs_text_path(raw["ts_us"], list(map(attrgetter("ts"), xs)))
    cols.exact.append(_exact_times(path, chunk) if exact else None)


def _exact_times(path: Path, chunk: bytes) -> tuple[pl.Series, pl.Series]:
    """ts/dur of the chunk's complete events re-read as JSON text and converted exactly."""
    rows = [e for e in dec.decode_time_text(path, chunk) if e.ph == "X"]
    text = pl.DataFrame(
        {
            "ts": pl.Series([None if e.ts is None else bytes(e.ts) for e in rows], dtype=pl.Binary),
            "dur": pl.Series([None if e.dur is None else bytes(e.dur) for e in rows], dtype=pl.Binary),
        }
    ).select(
        text_to_ns(pl.col("ts").cast(pl.String)).alias("ts"),
        text_to_ns(pl.col("dur").cast(pl.String)).alias("dur"),
    )
    return text["ts"], text["dur"]


def _concat_exact(
    exact: list[tuple[pl.Series, pl.Series] | None], heights: list[int]
) -> tuple[pl.Series | None, pl.Series | None]:
    """One exact ts/dur column over all chunks (NULL where a chunk took the float path), or None."""
    if all(e is None for e in exact):
        return None, None
    null = [pl.Series([None] * h, dtype=pl.Int64) for h in heights]
    ts = pl.concat([e[0] if e else n for e, n in zip(exact, null, strict=True)])
    dur = pl.concat([e[1] if e else n for e, n in zip(exact, null, strict=True)])
    return ts, dur
