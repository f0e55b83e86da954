"""A trace's `distributedInfo` read from the head of the file, before it is parsed, to group files into runs.

Kineto writes `distributedInfo` among the top-level keys before `traceEvents`, in the first
few kilobytes. Only the head is read (`HEAD_BYTES`, then up to `sniff.SNIFF_BYTES` when that
does not decide). The parser stays the authority on a rank: this only says which files belong
together. A head that decides nothing (cut short, unreadable, escaped keys) is `UNDECIDED`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from tracehouse.pipeline.discovery.sniff import SNIFF_BYTES, head

HEAD_BYTES = 1 << 16
_INFO_KEY = re.compile(rb'"distributedInfo"\s*:\s*')
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:')


@dataclass(frozen=True, kw_only=True)
class TraceHeader:
    """What the head of a trace says about its process: distributed or not, rank, world size."""

    decided: bool  # False: the head did not show whether the trace has distributedInfo
    distributed: bool = False  # the trace has a distributedInfo object
    rank: int | None = None
    world_size: int | None = None

    @property
    def single_process(self) -> bool:
        """A process that never initialised torch.distributed, or a world of one: a run of its own."""
        return self.decided and (not self.distributed or self.world_size == 1)


UNDECIDED = TraceHeader(decided=False)


def read_header(path: Path) -> TraceHeader:
    """The trace's distributedInfo as its head shows it (UNDECIDED when the head does not say)."""
    for size in (HEAD_BYTES, SNIFF_BYTES):
        data = head(path, size)
        if data is None:
            return UNDECIDED
        found = _header_of(data)
        if found.decided or len(data) < size:
            return found
    return UNDECIDED


def _header_of(data: bytes) -> TraceHeader:
    """The header in a head of bytes: distributedInfo before the events, none, or undecided."""
    text = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"["):
        return TraceHeader(decided=True)  # a bare array of events: no metadata at all
    events = _EVENTS_KEY.search(text)
    info = _INFO_KEY.search(text, 0, events.start() if events else len(text))
    if info is None:
        return TraceHeader(decided=events is not None and b"\\u" not in text[: events.start()])
    try:
        value, _ = json.JSONDecoder().raw_decode(text[info.end() :].decode("utf-8", errors="replace"))
    except ValueError:
        return UNDECIDED  # cut short by the head's end
    if not isinstance(value, dict):
        return TraceHeader(decided=True)
    return TraceHeader(
        decided=True,
        distributed=True,
        rank=_integer(value.get("rank")),
        world_size=_integer(value.get("world_size")),
    )


def _integer(value: object) -> int | None:
    """An integer field of distributedInfo as the parser reads it (a bool or a float is none)."""
    return value if type(value) is int else None
