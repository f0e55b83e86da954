"""MEMORY_EVENTS: the `[memory]` instant events (ph i) that `profile_memory=True` writes.

Neither event path keeps instant events; both note whether some event is named `[memory]` (the
scanner's name dictionary holds the names of every event; the msgspec path looks at each batch's
names), and only then call `memory_frame` on the file's text: a msgspec decode of the events
array into small Structs that keep the memory args as raw JSON text (every other key skipped; an
arg is read as an integer only where its text is one, so a number beyond double range in an arg
is NULL, never an error). One function for both paths: identical frames by construction.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import msgspec
import polars as pl
from tracehouse.pipeline.parsers.kineto.decode import first_byte, replace_invalid_utf8
from tracehouse.pipeline.parsers.kineto.events import _texts
from tracehouse.pipeline.parsers.kineto.limits import INT32_MAX, INT32_MIN
from tracehouse.pipeline.parsers.kineto.opargs import int_texts, utf8_texts
from tracehouse.pipeline.parsers.kineto.timestamps import text_to_ns
from tracehouse.pipeline.warehouse.schema import MEMORY_EVENTS

MEMORY_NAME = "[memory]"
# MEMORY_EVENTS column -> the args key, as Kineto writes it
ARG_KEYS = {
    "device_type": "Device Type",
    "device": "Device Id",
    "addr": "Addr",
    "bytes": "Bytes",
    "total_allocated": "Total Allocated",
    "total_reserved": "Total Reserved",
}
_INT32 = ("device_type", "device")

MemoryArgs = msgspec.defstruct(
    "MemoryArgs",
    [(c, msgspec.Raw, msgspec.field(default=None, name=k)) for c, k in ARG_KEYS.items()],
    gc=False,
)


class MemoryEvent(msgspec.Struct, gc=False):
    """An event with only what a memory event row needs."""

    ph: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = None  # type: ignore[assignment]
    args: MemoryArgs = msgspec.field(default_factory=MemoryArgs)


class _Document(msgspec.Struct, gc=False):
    traceEvents: list[MemoryEvent] = []


def memory_frame(data: Any, base_time_ns: int) -> pl.DataFrame:
    """MEMORY_EVENTS of the trace (file order): its `ph: i` events named `[memory]`.

    Rows whose `ts` is not a JSON number are dropped; args that are not integers (or, for
    device_type/device, outside int32) are NULL.
    """
    events = _decode_events(data)
    name = pl.Series(list(map(attrgetter("name"), events)), dtype=pl.String, strict=False)
    ph = pl.Series(list(map(attrgetter("ph"), events)), dtype=pl.String, strict=False)
    keep = ((name == MEMORY_NAME) & (ph == "i")).fill_null(False).arg_true().to_list()
    chosen = [events[i] for i in keep]
    del events
    return _frame(chosen, base_time_ns)


def _decode_events(data: Any) -> list[MemoryEvent]:
    """The events array (object or bare-array layout); invalid UTF-8 replaced as the msgspec path does."""
    type_ = list[MemoryEvent] if first_byte(data) == b"[" else _Document
    try:
        decoded = msgspec.json.decode(data, type=type_)
    except msgspec.DecodeError:
        decoded = msgspec.json.decode(replace_invalid_utf8(data), type=type_)
    return decoded if type_ is not _Document else decoded.traceEvents


def _integers(raws: list[Any]) -> pl.Series:
    """Raw JSON values as Int64: integers within int64, NULL for anything else (float, text, 1e400)."""
    texts = utf8_texts(pl.Series([None if r is None else bytes(r) for r in raws], dtype=pl.Binary))
    return int_texts(texts)


def _frame(events: list[MemoryEvent], base_time_ns: int) -> pl.DataFrame:
    args = list(map(attrgetter("args"), events))
    ts = [
        None if t is None else bytes(t).decode("utf-8", errors="replace")
        for t in map(attrgetter("ts"), events)
    ]
    frame = pl.DataFrame(
        {
            "ts": pl.Series(ts, dtype=pl.String),
            "pid": _texts(list(map(attrgetter("pid"), events))),
            "tid": _texts(list(map(attrgetter("tid"), events))),
            **{c: _integers(list(map(attrgetter(c), args))) for c in ARG_KEYS},
        }
    )
    number = pl.col("ts").str.contains(r"^-?[0-9]")
    in_int32 = {c: pl.when(pl.col(c).is_between(INT32_MIN, INT32_MAX)).then(pl.col(c)) for c in _INT32}
    return (
        frame.filter(number.fill_null(False))
        .with_columns((text_to_ns(pl.col("ts")) + base_time_ns).alias("ts_unix_ns"), **in_int32)
        .select([pl.col(c).cast(t) for c, t in MEMORY_EVENTS.items()])
    )
