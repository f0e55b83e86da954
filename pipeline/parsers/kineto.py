"""Parse one Kineto (PyTorch profiler) rank trace into the raw tables of `pipeline.schema`.

`parse_trace(path)` is pure and module-level: it reads one `.json` / `.json.gz` file and
returns a `ParsedTrace` (EVENTS, STEPS, COLLECTIVES, THREADS, PROCESS_GROUPS + TraceMeta).
It is the unit of parallel work in ingest. Any unreadable input raises `TraceFormatError`
with a one-line reason naming the file.

Decisions (details in the kineto_* modules):
* Layouts: an object with `traceEvents`, or a bare array of events. Categories match
  `KIND_BY_CATEGORY` case-insensitively; anything else is kind "other".
* Time: `ts_unix_ns = baseTimeNanoseconds + ns(ts)` when the trace has that key, else
  `ns(ts)` (epoch µs), exact to the ns (`kineto_time`). `dur_ns = ns(dur)`.
* Only complete events (`ph == "X"`) become EVENTS; events with dur < 0 are dropped and
  counted in `meta.negative_dur_events`; `M` events feed THREADS; flows/instants are skipped.
  A complete event without ts or dur is an error; so is a trace with no complete events
  ("no trace events").
* `external_id` is `args["External id"]`, or the 2020-2021 spelling `args["external id"]`.
* Invalid UTF-8 in the JSON text is replaced by U+FFFD (`extra["invalid_utf8"] = "replaced"`),
  not an error: one mangled kernel name should not lose a rank.
* Integers that overflow 64 bits in args (NCCL comm ids) are ignored (NULL where a column).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import polars as pl
from tracehouse.pipeline.errors import TraceFormatError
from tracehouse.pipeline.parsers import kineto_decode as dec
from tracehouse.pipeline.parsers.kineto_collectives import collectives_frame
from tracehouse.pipeline.parsers.kineto_commargs import comm_args_frame
from tracehouse.pipeline.parsers.kineto_events import (
    check_times,
    events_frame,
    raw_columns,
    threads_frame,
    with_unix_ns,
)
from tracehouse.pipeline.parsers.kineto_meta import process_groups_frame, top_level, trace_meta
from tracehouse.pipeline.parsers.kineto_steps import steps_frame
from tracehouse.pipeline.parsers.kineto_time import needs_text_path, text_to_ns
from tracehouse.pipeline.parsers.trace_types import ParsedTrace
from tracehouse.pipeline.schema import EVENTS

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


def parse_trace(path: str | Path) -> ParsedTrace:
    """Parse one Kineto rank trace file into columnar frames plus its metadata."""
    path = Path(path)
    data = dec.read_bytes(path)
    fields, events, top_replaced = dec.decode_top(path, data)
    raws, split_replaced = dec.split_events(path, events)
    top = top_level(
        path,
        fields,
        bare_array=fields.traceEvents is None and events is data,
        invalid_utf8=top_replaced or split_replaced,
    )
    del fields, events, data
    cols = _Columns(invalid_utf8=top.invalid_utf8)
    for start in range(0, len(raws), CHUNK_EVENTS):
        _read_chunk(path, raws[start : start + CHUNK_EVENTS], cols)
    del raws
    if not cols.raw or sum(f.height for f in cols.raw) == 0:
        raise TraceFormatError(path, "no trace events (no complete ph=X events)")
    raw = _with_rows(pl.concat(cols.raw, how="vertical"))
    check_times(path, raw)
    ts_ns, dur_ns = _concat_exact(cols.exact, [f.height for f in cols.raw])
    raw = with_unix_ns(raw, top.base_time_ns, ts_ns, dur_ns)
    negative = int((raw["dur_ns"] < 0).sum())
    full = events_frame(raw.filter(pl.col("dur_ns") >= 0))
    comm_args = pl.concat(cols.comm_args, how="vertical")
    return ParsedTrace(
        meta=trace_meta(top, negative),
        events=full.select(EVENTS.keys()),
        steps=steps_frame(full),
        collectives=collectives_frame(full, comm_args, top),
        threads=threads_frame(cols.metas, cols.loose),
        process_groups=process_groups_frame(top),
        extra=_extra(cols),
    )


def _read_chunk(path: Path, raws: list[Any], cols: _Columns) -> None:
    """Decode one batch of events into columns; its Python objects die on return."""
    joined = dec.join_events(raws)
    events, loose, chunk = dec.decode_chunk(path, joined)
    cols.loose |= loose
    cols.invalid_utf8 |= chunk is not joined
    xs = [e for e in events if e.ph == "X"]
    cols.metas.extend(e for e in events if e.ph == "M")
    raw = raw_columns(xs, loose)
    offset = sum(f.height for f in cols.raw)
    cols.comm_args.append(comm_args_frame(xs, raw).with_columns(pl.col("_row") + offset))
    cols.raw.append(raw)
    exact = needs_text_path(raw["ts_us"], list(map(attrgetter("ts"), xs)))
    cols.exact.append(_exact_times(path, chunk) if exact else None)


def _with_rows(raw: pl.DataFrame) -> pl.DataFrame:
    return raw.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"))


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


def _extra(cols: _Columns) -> dict[str, str]:
    extra = {"decoder": "loose" if cols.loose else "typed"}
    if cols.invalid_utf8:
        extra["invalid_utf8"] = "replaced"
    return extra
