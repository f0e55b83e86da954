"""Read one Kineto chrome-trace file and decode it into typed msgspec Structs (transient, never returned).

The decoder is schema-driven (`structs`): `args` keeps only the keys the parser turns
into columns. The Structs live only inside `parse_trace`; columns are built from them and they
are dropped.

Fast path: hot `args` fields typed as `int`. A file that breaks those types (a string stream,
a list where an int belongs) is decoded again with every arg typed `object` and cleaned per
column (`loose=True`): slower, but it parses.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import zlib
from pathlib import Path
from typing import Any

import msgspec
from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.parsers.kineto.depth import deeper_than
from tracehouse.pipeline.parsers.kineto.gunzip import gunzip
from tracehouse.pipeline.parsers.kineto.limits import DEPTH_ERROR, MAX_DEPTH
from tracehouse.pipeline.parsers.kineto.structs import Event, LooseEvent, TimeOnly, TopLevelFields

_LEADING_SPACE = re.compile(rb"\s*")
_EVENT_AT = re.compile(r"\$\[(\d+)\]")


class _InvalidUtf8(Exception):
    """The JSON text holds bytes that are not UTF-8."""


def read_bytes(path: Path) -> bytes | mmap.mmap:
    """The file's JSON text: gunzipped when it starts with the gzip magic number, else memory-mapped.

    Mapping a plain JSON file skips copying it into fresh memory (1 GB: 0.1 s instead of 1.1 s);
    the mapping is read-only and unmapped when the last reference goes.
    """
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO would block the open forever
            raise TraceFormatError(path, "not a regular file")
        with path.open("rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
            f.seek(0)
            size = os.fstat(f.fileno()).st_size
            data = f.read() if gz or size == 0 else mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise TraceFormatError(path, "file does not exist") from None
    except (OSError, ValueError) as exc:
        raise TraceFormatError(path, f"cannot read file: {getattr(exc, 'strerror', None) or exc}") from None
    if gz:
        try:
            data = gunzip(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(path, f"corrupt gzip data: {exc}") from None
    if not first_byte(data):  # nothing but whitespace (a regex match: no copy of the buffer)
        raise TraceFormatError(path, "empty file")
    return data


def first_byte(data: bytes | mmap.mmap) -> bytes:
    """The first non-whitespace byte (without copying the buffer as `lstrip` would)."""
    start = _LEADING_SPACE.match(data).end()
    return data[start : start + 1]


def _decode(path: Path, data: Any, type_: Any) -> Any:
    """msgspec's decode; syntax errors worded, invalid UTF-8 signalled (ValidationError passes)."""
    try:
        return msgspec.json.decode(data, type=type_)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError as exc:
        if "UTF-8" in str(exc):
            raise _InvalidUtf8 from None
        raise TraceFormatError(path, f"invalid JSON: {exc}") from None


def _decode_text(path: Path, data: Any, type_: Any) -> tuple[Any, Any]:
    """(decoded value, text decoded): `data`, or a copy with invalid UTF-8 replaced if msgspec met some."""
    try:
        return _decode(path, data, type_), data
    except _InvalidUtf8:
        text = replace_invalid_utf8(data)
        return _decode(path, text, type_), text


def replace_invalid_utf8(data: Any) -> bytes:
    """The text with invalid UTF-8 replaced by U+FFFD (as Python decodes it)."""
    return bytes(data).decode("utf-8", errors="replace").encode()


def not_a_trace(exc: msgspec.ValidationError, first_event: int | None = None) -> str:
    """A ValidationError as a reason: "not a Kineto trace: <what> at <where>".

    msgspec says where as `$.field` or, in a batch of events, `$[i].field`: here the event's
    index in the whole traceEvents array (the batch starts at `first_event`).
    """
    what, _, where = str(exc).partition(" - at `")
    where = where.removesuffix("`")
    event = _EVENT_AT.match(where) if first_event is not None else None
    if event is not None:
        where = f"traceEvents[{first_event + int(event[1])}]{where[event.end() :]}"
    where = where.removeprefix("$.")
    return f"not a Kineto trace: {what} at {where}" if where else f"not a Kineto trace: {what}"


def decode_top(path: Path, data: bytes) -> tuple[TopLevelFields, Any, bool]:
    """(top-level fields, the traceEvents array as raw JSON, UTF-8 replaced?).

    A bare array has no top-level fields. The nesting depth is checked first: msgspec
    recurses once per level, and the C scanner rejects the same documents (`kineto.limits`).
    """
    if deeper_than(data, MAX_DEPTH):
        raise TraceFormatError(path, DEPTH_ERROR)
    first = first_byte(data)
    if first == b"[":
        return TopLevelFields(), data, False
    if first != b"{":
        raise TraceFormatError(path, "not a Kineto trace: top level is neither an object nor an array")
    try:
        top, text = _decode_text(path, data, TopLevelFields)
    except msgspec.ValidationError as exc:
        raise TraceFormatError(path, not_a_trace(exc)) from None
    return top, top.traceEvents, text is not data


def split_events(path: Path, events: Any) -> tuple[list[msgspec.Raw], bool]:
    """(one raw JSON slice per event, UTF-8 replaced?): a fast scan, nothing decoded yet."""
    if events is None:
        return [], False
    try:
        raws, text = _decode_text(path, events, list[msgspec.Raw])
    except msgspec.ValidationError:
        raise TraceFormatError(path, "not a Kineto trace: traceEvents is not an array") from None
    return raws, text is not events


def join_events(raws: list[msgspec.Raw]) -> bytes:
    """A chunk of raw events as one JSON array."""
    return b"[" + b",".join(raws) + b"]"


def decode_chunk(path: Path, chunk: bytes, first_event: int) -> tuple[list[Any], bool, bytes]:
    """(events, loose, chunk): the fast typed decode, or the loose one when the chunk breaks its types.

    The returned chunk is what was decoded: invalid UTF-8 (a mangled kernel name) is replaced
    by U+FFFD rather than losing the whole file. `first_event`: the chunk's first index in
    traceEvents (for the error's place).
    """
    try:
        events, text = _decode_text(path, chunk, list[Event])
        return events, False, text
    except msgspec.ValidationError:
        pass
    try:
        events, text = _decode_text(path, chunk, list[LooseEvent])
    except msgspec.ValidationError as exc:  # the loose decode's error: the one that no type change avoids
        raise TraceFormatError(path, not_a_trace(exc, first_event)) from None
    return events, True, text


def decode_time_text(path: Path, chunk: bytes) -> list[Any]:
    """Every event's `ph`, `ts` and `dur` with ts/dur as raw JSON text (the exact-time path)."""
    return _decode(path, chunk, list[TimeOnly])
