"""Columns from decoded events: the EVENTS frame (with launch times) and the THREADS frame."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import polars as pl
from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.parsers.kineto.limits import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_TIME_US,
    int64_or_none,
    shown,
)
from tracehouse.pipeline.parsers.kineto.opargs import OP_ARGS, decoded_op_args
from tracehouse.pipeline.parsers.kineto.timestamps import float_to_ns
from tracehouse.pipeline.warehouse.schema import EVENTS, THREADS

GPU_KINDS = ("kernel", "memcpy", "memset")
RUNTIME_KIND = "runtime"
NO_EVENTS = "no trace events (no complete ph=X events)"


# A metadata (ph M) event: kind (the event name), pid, tid, value (args.name when it is text).
MetaRow = tuple[str | None, str | None, str | None, str | None]


@dataclass(frozen=True, kw_only=True)
class EventRows:
    """What both event paths (C scanner, msgspec batches) hand to `parse_trace`."""

    raw: pl.DataFrame  # complete events: _row, cat, name, pid, tid, hot args, op args, ts_ns/dur_ns (no base)
    comm_args: pl.DataFrame  # commargs.COMM_ARGS, keyed by _row
    metas: list[MetaRow]
    loose: bool
    invalid_utf8: bool
    decoder: str  # "scan", "typed" or "loose"
    memory: bool = False  # some event (any ph) is named `[memory]`: memory.memory_frame has rows to read


def _ints(values: list[Any], loose: bool) -> pl.Series:
    """Int64 column; anything that is not an integer (text, float, > 64 bits) becomes NULL.

    Loose values (any JSON) are sorted out in Python first: Polars would walk a nested list
    once per element and level (cubic in its depth).
    """
    if loose:
        return pl.Series([int64_or_none(v) for v in values], dtype=pl.Int64)
    try:
        return pl.Series(values, dtype=pl.Int64)
    except (TypeError, OverflowError, pl.exceptions.PolarsError):
        return pl.Series([int64_or_none(v) for v in values], dtype=pl.Int64)


def _texts(values: list[Any]) -> pl.Series:
    """pid/tid as text: numbers and strings mix in Kineto traces (strings are the rare case)."""
    numbers = pl.Series(values, dtype=pl.Int64, strict=False)
    text = numbers.cast(pl.String)
    if numbers.null_count():
        holes = numbers.is_null().arg_true().to_list()
        text = text.scatter(holes, [None if values[i] is None else str(values[i]) for i in holes])
    return text


def _strings(values: list[Any], loose: bool) -> pl.Series:
    if loose:
        values = [v if type(v) is str else None for v in values]
    return pl.Series(values, dtype=pl.String)


def _times(path: Path, xs: list[Any], key: str, loose: bool) -> pl.Series:
    """A complete event's ts or dur in µs as written (Float64); TraceFormatError unless a number in range.

    The range (|value| < MAX_TIME_US) is where the float path is exact and ns fit int64; a JSON
    integer too large for a float would otherwise become NULL.
    """
    values = list(map(attrgetter(key), xs))
    if loose:
        wrong = [i for i, v in enumerate(values) if v is not None and type(v) not in (int, float)]
        if wrong:
            first = xs[wrong[0]]
            raise TraceFormatError(
                path, f"complete (ph=X) event {first.name!r}: {key} {values[wrong[0]]!r:.40} is not a number"
            )
    us = pl.Series(values, dtype=pl.Float64, strict=False)
    outside = us.abs() >= MAX_TIME_US
    if us.null_count() != values.count(None):  # an integer beyond float range
        outside = outside.fill_null(True) & pl.Series([v is not None for v in values])
    if outside.any():
        i = outside.arg_true()[0]
        value = values[i] if type(values[i]) is float else shown(values[i])
        raise TraceFormatError(
            path,
            f"complete (ph=X) event {xs[i].name!r}: {key} {value} µs is out of range (|{key}| < 2^53 µs)",
        )
    return us


def raw_columns(path: Path, xs: list[Any], loose: bool) -> pl.DataFrame:
    """One row per complete event, values as written (ts/dur still float µs)."""
    args = list(map(attrgetter("args"), xs))

    def arg(attr: str) -> list[Any]:
        return list(map(attrgetter(attr), args))

    external = _ints(arg("external_id"), loose).fill_null(_ints(arg("external_id_legacy"), loose))
    return pl.DataFrame(
        {
            "_row": pl.int_range(len(xs), dtype=pl.Int64, eager=True),
            "cat": _strings(list(map(attrgetter("cat"), xs)), loose),
            "name": _strings(list(map(attrgetter("name"), xs)), loose),
            "ts_us": _times(path, xs, "ts", loose),
            "dur_us": _times(path, xs, "dur", loose),
            "pid": _texts(list(map(attrgetter("pid"), xs))),
            "tid": _texts(list(map(attrgetter("tid"), xs))),
            "stream": _ints(arg("stream"), loose),
            "device": _ints(arg("device"), loose),
            "correlation": _ints(arg("correlation"), loose),
            "external_id": external,
            **decoded_op_args(arg),
        }
    )


def check_times(path: Path, raw: pl.DataFrame, base_time_ns: int) -> None:
    """Complete events must carry both `ts` and `dur`, and their times in ns must fit int64.

    Checked on both paths alike: `ts_unix_ns = base + ts_ns` of every complete event and
    `ts_unix_ns + dur_ns` of those kept (dur >= 0), exactly (Python integers at the extremes).
    """
    if raw["ts_ns"].null_count() or raw["dur_ns"].null_count():
        missing = raw.filter(pl.col("ts_ns").is_null() | pl.col("dur_ns").is_null())
        first = missing.row(0, named=True)
        raise TraceFormatError(
            path,
            f"{missing.height} complete (ph=X) events lack ts or dur; first: {first['name']!r}",
        )
    ts, kept = raw["ts_ns"], raw.filter(pl.col("dur_ns") >= 0)
    for start in (base_time_ns + ts.min(), base_time_ns + ts.max()):
        if not INT64_MIN <= start <= INT64_MAX:
            name = raw.filter(pl.col("ts_ns") == start - base_time_ns)["name"][0]
            raise TraceFormatError(path, _out_of_range(name, "ts_unix_ns", start, base_time_ns))
    if kept.height == 0 or base_time_ns + ts.max() + kept["dur_ns"].max() <= INT64_MAX:
        return  # no end can overflow: every trace within centuries of the epoch
    late = kept.filter(pl.col("ts_ns") > INT64_MAX - base_time_ns - kept["dur_ns"].max())
    for name, ts_ns, dur_ns in late.select("name", "ts_ns", "dur_ns").iter_rows():
        if base_time_ns + ts_ns + dur_ns > INT64_MAX:
            raise TraceFormatError(
                path, _out_of_range(name, "ts_unix_ns + dur_ns", base_time_ns + ts_ns + dur_ns, base_time_ns)
            )


def _out_of_range(name: str | None, what: str, ns: int, base_time_ns: int) -> str:
    return (
        f"complete (ph=X) event {name!r}: {what} {shown(ns)} (baseTimeNanoseconds {base_time_ns} + ts"
        f"{' + dur' if what != 'ts_unix_ns' else ''}) is out of range (int64)"
    )


def with_ns(raw: pl.DataFrame, ts_ns: pl.Series | None, dur_ns: pl.Series | None) -> pl.DataFrame:
    """Replace ts_us/dur_us by ts_ns/dur_ns: exact text-path values where given, else the float path."""
    ts, dur = float_to_ns(pl.col("ts_us")), float_to_ns(pl.col("dur_us"))
    if ts_ns is not None:  # NULL in batches that took the float path
        ts, dur = pl.coalesce(pl.lit(ts_ns), ts), pl.coalesce(pl.lit(dur_ns), dur)
    out = raw.with_columns(ts.alias("ts_ns"), dur.alias("dur_ns"))
    return out.drop("ts_us", "dur_us")


def _launch(columns: list[str], base_time_ns: int) -> pl.Expr:
    """A GPU event's launch: the earliest runtime call with its correlation (NULL if none).

    GPU events are kernel/memcpy/memset events with a stream and a correlation; runtime calls
    count when they have a correlation (and dur >= 0: negative ones are dropped first). The
    C scanner computes this as it reads (`launch_ns`); the msgspec path uses a window.
    """
    if "launch_ns" in columns:
        return pl.col("launch_ns") + base_time_ns
    is_runtime = (pl.col("kind") == RUNTIME_KIND) & pl.col("correlation").is_not_null()
    launch = pl.when(is_runtime).then(pl.col("ts_unix_ns")).min().over("correlation")
    is_gpu = (
        pl.col("kind").is_in(GPU_KINDS) & pl.col("stream").is_not_null() & pl.col("correlation").is_not_null()
    )
    return pl.when(is_gpu).then(launch)


def events_frame(raw: pl.DataFrame, base_time_ns: int) -> tuple[pl.DataFrame, int]:
    """(EVENTS columns plus `_row`, `_comm`, `_step`, the op args; the count of dropped negative durations).

    One lazy query: absolute times, negative durations dropped, launch times. A `device`
    outside int32 becomes NULL (no real device index is that large).
    """
    negative = int((raw["dur_ns"] < 0).sum())
    frame = raw.lazy().with_columns(pl.col("ts_ns") + base_time_ns).rename({"ts_ns": "ts_unix_ns"})
    if negative:
        frame = frame.filter(pl.col("dur_ns") >= 0)
    device = pl.col("device")
    in_int32 = device.is_between(INT32_MIN, INT32_MAX)
    full = frame.with_columns(
        _launch(raw.columns, base_time_ns).alias("launch_ts_unix_ns"),
        pl.when(in_int32).then(device).alias("device"),
    ).select(
        [pl.col(c).cast(t) for c, t in EVENTS.items()]
        + [pl.col("_row"), pl.col("_comm"), pl.col("_step"), *map(pl.col, OP_ARGS)]
    )
    return full.collect(), negative


def meta_rows(metas: list[Any], loose: bool) -> list[MetaRow]:
    """Metadata (ph M) events as (kind, pid, tid, value): `value` is `args.name` when it is text."""
    frame = pl.DataFrame(
        {
            "kind": _strings(list(map(attrgetter("name"), metas)), loose),
            "pid": _texts(list(map(attrgetter("pid"), metas))),
            "tid": _texts(list(map(attrgetter("tid"), metas))),
            "value": _strings([e.args.meta_name for e in metas], loose=True),
        }
    )
    return list(frame.iter_rows())


def threads_frame(metas: list[MetaRow]) -> pl.DataFrame:
    """One row per (pid, tid) named by `thread_name`, plus one per pid named only by `process_name`.

    A later thread_name renames the thread (pt_main_thread, then pt_autograd_0): last wins; a
    process keeps the tid of its first `process_name` event. Plain Python: a trace holds a few
    metadata events per thread, and a Polars query costs more than this whole loop. A NULL pid
    names nothing across events (as in a SQL join).
    """
    threads: dict[tuple[str | None, str | None], str] = {}
    processes: dict[str | None, tuple[str | None, str]] = {}
    for kind, pid, tid, value in metas:
        if value is None:
            continue
        if kind == "thread_name":
            threads[pid, tid] = value
        elif kind == "process_name":
            processes[pid] = (processes[pid][0] if pid in processes else tid, value)
    process_name = {pid: name for pid, (_, name) in processes.items() if pid is not None}
    named = [(pid, tid, name, process_name.get(pid)) for (pid, tid), name in threads.items()]
    with_threads = {pid for pid, _ in threads if pid is not None}
    unnamed = [(pid, tid, None, name) for pid, (tid, name) in processes.items() if pid not in with_threads]
    return pl.DataFrame(named + unnamed, schema=THREADS, orient="row")
