"""The fast path of `parse_trace`: the C scanner (`_kineto_scan`) reads the whole JSON text.

One pass over the document: the traceEvents array becomes int32 codes into lists of unique
strings, int64 columns with byte validity masks, and the byte ranges of the few rare args
(ARG_FIELDS typed Any or Raw) that Python decodes with msgspec; the other top-level members
come back as byte ranges, decoded here as TopLevelFields. The scanner raises ValueError on
anything it does not reproduce exactly; `scan_trace` then returns None and the msgspec path
(`kineto_decode` + `kineto_chunks`) runs, which also words the user-facing errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import numpy.ma  # Polars imports it on its first numpy Series: pay that at import, once
import polars as pl
from tracehouse.pipeline.parsers.kineto_chunks import CHUNK_EVENTS
from tracehouse.pipeline.parsers.kineto_commargs import comm_args_rows
from tracehouse.pipeline.parsers.kineto_decode import (
    ARG_FIELDS,
    TopLevelFields,
    first_byte,
    replace_invalid_utf8,
)
from tracehouse.pipeline.parsers.kineto_events import EventRows, MetaRow
from tracehouse.pipeline.parsers.kineto_names import category_facts, is_comm_name, name_facts

try:
    from tracehouse.pipeline import _kineto_scan
except ImportError:  # the optional extension did not compile: the msgspec path does everything
    _kineto_scan = None

# Args returned as raw JSON: the rare ones (typed Any, decoded; or Raw, kept as text). The
# scanner converts the hot integer ones itself. Field 0 must be the metadata `name`.
SIDE_FIELDS = sorted(
    ((attr, key, typ) for attr, key, typ in ARG_FIELDS if typ is Any or typ is msgspec.Raw),
    key=lambda f: f[0] != "meta_name",
)
_SIDE_KEYS = tuple((key.encode(), typ is Any) for _, key, typ in SIDE_FIELDS)
_FIELD_ID = {attr: i for i, (attr, _, _) in enumerate(SIDE_FIELDS)}
_DECODED = {attr for attr, _, typ in SIDE_FIELDS if typ is Any}
_INT_COLS = ("ts", "dur", "stream", "device", "correlation", "external_id")


@dataclass(frozen=True, kw_only=True)
class Scanned:
    """A whole trace read by the scanner."""

    fields: TopLevelFields
    bare_array: bool
    rows: EventRows


def available() -> bool:
    """True when the C scanner extension is importable."""
    return _kineto_scan is not None


def scan_trace(data: bytes) -> Scanned | None:
    """The trace through the C scanner, or None when it is missing or declines the input."""
    if _kineto_scan is None:
        return None
    comm = _CommAnswers()
    try:
        cols = _kineto_scan.scan(data, _SIDE_KEYS, comm)
    except ValueError:
        return None
    fields = _top_fields(data, cols["top"])
    if fields is None:
        return None
    cols["name_comm"] = comm.answers
    return Scanned(fields=fields, bare_array=first_byte(data) == b"[", rows=_rows(data, cols))


class _CommAnswers:
    """The scanner's name filter: `is_comm_name`, its answers kept in name-code order.

    The scanner calls it once per distinct name, as it adds the name to its dictionary, so
    answer i belongs to name code i (`_complete` checks the counts match).
    """

    def __init__(self) -> None:
        self.answers: list[bool] = []

    def __call__(self, name: str) -> bool:
        answer = is_comm_name(name)
        self.answers.append(answer)
        return answer


def _top_fields(data: bytes, spans: bytes) -> TopLevelFields | None:
    """The top-level members other than traceEvents, decoded as the msgspec path does; None if odd."""
    view = memoryview(data)
    offsets = np.frombuffer(spans, np.int64).reshape(-1, 2)
    text = b"{" + b",".join(view[s:e] for s, e in offsets) + b"}"
    try:
        return msgspec.json.decode(text, type=TopLevelFields)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # invalid UTF-8 (replaced over the whole file) or not a trace: the msgspec path


def _rows(data: bytes, cols: dict[str, Any]) -> EventRows:
    """EventRows from the scanner's columns."""
    flagged = {e // CHUNK_EVENTS for e in cols["invalid_utf8_events"]}
    side = _side_texts(data, cols["side"], flagged)
    is_x = np.frombuffer(cols["kind"], np.uint8) == 0
    xs = _complete(cols, _selector(is_x))
    metas = _meta_rows(cols, side, np.flatnonzero(~is_x).tolist())
    candidates = xs["_comm"].arg_true().to_list()
    return EventRows(
        raw=xs,
        comm_args=comm_args_rows(candidates, lambda i, attr: _arg(side, i, attr)),
        metas=metas,
        loose=False,
        invalid_utf8=bool(flagged),
        decoder="scan",
    )


def _selector(mask: np.ndarray) -> slice | np.ndarray:
    """The rows where mask holds: a slice (no copy) when they are contiguous, as they mostly are."""
    rows = np.flatnonzero(mask)
    if rows.size and rows[-1] - rows[0] + 1 == rows.size:
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return rows


def _values(cols: dict[str, Any], name: str) -> pl.Series:
    """The unique strings of one dictionary, NULL first (code 0: null, else 1 + index)."""
    return pl.Series(name, [None, *cols[f"{name}_values"]], dtype=pl.String)


def _codes(cols: dict[str, Any], name: str, rows: slice | np.ndarray) -> np.ndarray:
    return np.frombuffer(cols[name], np.int32)[rows]


def _strings(cols: dict[str, Any], name: str, rows: slice | np.ndarray) -> pl.Series:
    """The dictionary column of the selected rows as text."""
    return _values(cols, name).gather(_codes(cols, name, rows))


def _complete(cols: dict[str, Any], rows: slice | np.ndarray) -> pl.DataFrame:
    """The complete events, with `kind`, `_comm`, `_step` evaluated once per unique cat/name."""
    cats = category_facts([None, *cols["cat_values"]])
    names = cols["name_values"]
    comm = cols["name_comm"] if len(cols["name_comm"]) == len(names) else None
    names = name_facts([None, *names], None if comm is None else [False, *comm])
    frame = pl.DataFrame(
        {
            **cats[_codes(cols, "cat", rows)].to_dict(),
            **names[_codes(cols, "name", rows)].to_dict(),
            "pid": _strings(cols, "pid", rows),
            "tid": _strings(cols, "tid", rows),
            **{c: np.frombuffer(cols[c], np.int64)[rows] for c in _INT_COLS},
            **{f"{c}_valid": np.frombuffer(cols[f"{c}_valid"], np.bool_)[rows] for c in _INT_COLS},
        }
    )
    nullable = [pl.when(pl.col(f"{c}_valid")).then(pl.col(c)).alias(c) for c in _INT_COLS]
    return frame.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
        "cat",
        "name",
        "pid",
        "tid",
        *nullable,
        "kind",
        "_comm",
        "_step",
    ).rename({"ts": "ts_ns", "dur": "dur_ns"})


def _side_texts(data: bytes, side: list[tuple[int, ...]], flagged: set[int]) -> dict[tuple[int, int], bytes]:
    """(row, field) -> the arg's raw JSON text; the last one wins, as in msgspec.

    The msgspec path replaces invalid UTF-8 in a whole batch of events when one of its decoded
    strings is invalid; the same batches are replaced here.
    """
    view = memoryview(data)
    texts = {}
    for row, field, start, end, event in side:
        text = bytes(view[start:end])
        texts[row, field] = replace_invalid_utf8(text) if event // CHUNK_EVENTS in flagged else text
    return texts


def _arg(side: dict[tuple[int, int], bytes], row: int, attr: str) -> Any:
    """A comm arg as the msgspec path holds it: decoded (Any) or raw JSON text (Raw)."""
    text = side.get((row, _FIELD_ID[attr]))
    if text is None or attr not in _DECODED:
        return text
    return msgspec.json.decode(text)


def _meta_rows(cols: dict[str, Any], side: dict[tuple[int, int], bytes], rows: list[int]) -> list[MetaRow]:
    """The metadata events (kind, pid, tid, args.name when it is text); there are a few per thread."""

    def text(name: str, row: int) -> str | None:
        code = codes[name][row]
        return None if code == 0 else values[name][code - 1]

    codes = {name: memoryview(cols[name]).cast("i") for name in ("name", "pid", "tid")}
    values = {name: cols[f"{name}_values"] for name in codes}
    out = []
    for i, row in enumerate(rows):
        value = _arg(side, i, "meta_name")
        out.append(
            (text("name", row), text("pid", row), text("tid", row), value if type(value) is str else None)
        )
    return out
