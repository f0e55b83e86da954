"""The fast path of `parse_trace`: the C scanner (`_kineto_scan`) reads the whole JSON text.

One pass over the document: the traceEvents array becomes int32 codes into lists of unique
strings, int64 columns with byte validity masks, and the byte ranges of the few rare args
(ARG_FIELDS typed Any or Raw) that Python decodes with msgspec; the other top-level members
come back as byte ranges, decoded here as TopLevelFields. The scanner raises ValueError on
anything it does not reproduce exactly; `scan_trace` then returns None and the msgspec path
(`decode` + `chunks`) runs, which also words the user-facing errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import numpy.ma  # Polars imports it on its first numpy Series: pay that at import, once
import polars as pl
from tracehouse.pipeline.parsers.kineto.chunks import CHUNK_EVENTS
from tracehouse.pipeline.parsers.kineto.commargs import comm_args_rows
from tracehouse.pipeline.parsers.kineto.decode import first_byte, replace_invalid_utf8
from tracehouse.pipeline.parsers.kineto.events import GPU_KINDS, RUNTIME_KIND, EventRows, MetaRow
from tracehouse.pipeline.parsers.kineto.limits import SCANNER_LIMITS
from tracehouse.pipeline.parsers.kineto.memory import MEMORY_NAME
from tracehouse.pipeline.parsers.kineto.names import category_facts, is_comm_name, kind_of, name_facts
from tracehouse.pipeline.parsers.kineto.opargs import scanned_op_args
from tracehouse.pipeline.parsers.kineto.structs import ARG_FIELDS, OP_ARG_FIELDS, TopLevelFields

try:
    from tracehouse.pipeline.parsers.kineto import _kineto_scan
except ImportError:  # the optional extension did not compile: the msgspec path does everything
    _kineto_scan = None

# Args returned as raw JSON: the rare ones (typed Any, decoded; or Raw, kept as text). The
# scanner converts the hot integer ones itself. Field 0 must be the metadata `name`.
SIDE_FIELDS = sorted(
    ((attr, key, typ) for attr, key, typ in ARG_FIELDS if typ is Any or typ is msgspec.Raw),
    key=lambda f: f[0] != "meta_name",
)
# (key, decoded, every row): the op args are kept for every complete event (packed side_rows).
_SIDE_KEYS = tuple((key.encode(), typ is Any, attr in OP_ARG_FIELDS) for attr, key, typ in SIDE_FIELDS)
_FIELD_ID = {attr: i for i, (attr, _, _) in enumerate(SIDE_FIELDS)}
_DECODED = {attr for attr, _, typ in SIDE_FIELDS if typ is Any}
_TOP_DECODER = msgspec.json.Decoder(TopLevelFields)  # built once: msgspec's recommended use
# Raw frame column -> scanner int column ("launch": see _kineto_scan.launch_times).
_INT_COLUMNS = {
    "ts_ns": "ts",
    "dur_ns": "dur",
    **{c: c for c in ("stream", "device", "correlation", "external_id")},
    "launch_ns": "launch",
}


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
    try:
        cols = _kineto_scan.scan(data, _SIDE_KEYS, is_comm_name, launch_role, SCANNER_LIMITS)
    except ValueError:
        return None
    fields = _top_fields(data, cols["top"])
    if fields is None:
        return None
    return Scanned(fields=fields, bare_array=first_byte(data) == b"[", rows=_rows(data, cols))


def launch_role(cat: str) -> int:
    """The scanner's category answer: 1 for runtime calls, 2 for GPU events (launch times), else 0."""
    kind = kind_of(cat)
    return 1 if kind == RUNTIME_KIND else 2 if kind in GPU_KINDS else 0


def _top_fields(data: bytes, spans: bytes) -> TopLevelFields | None:
    """The top-level members other than traceEvents, decoded as the msgspec path does; None if odd."""
    view = memoryview(data)
    offsets = np.frombuffer(spans, np.int64).reshape(-1, 2)
    text = b"{" + b",".join(view[s:e] for s, e in offsets) + b"}"
    try:
        return _TOP_DECODER.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # invalid UTF-8 (replaced over the whole file) or not a trace: the msgspec path


def _rows(data: bytes, cols: dict[str, Any]) -> EventRows:
    """EventRows from the scanner's columns."""
    flagged = {e // CHUNK_EVENTS for e in cols["invalid_utf8_events"]}
    side = _side_texts(data, cols["side"], flagged)
    xs = _complete(cols)
    xs = xs.with_columns(**scanned_op_args(data, cols["side_rows"], _FIELD_ID, xs.height))
    candidates = xs["_comm"].arg_true().to_list()
    return EventRows(
        raw=xs,
        comm_args=comm_args_rows(candidates, lambda i, attr: _arg(side, i, attr)),
        metas=_meta_rows(cols, side),
        loose=False,
        invalid_utf8=bool(flagged),
        decoder="scan",
        memory=MEMORY_NAME in cols["name_values"],  # the names of every event, `[memory]` instants too
    )


def _strings(cols: dict[str, Any], name: str) -> pl.Series:
    """A dictionary column as text (code 0: null, else 1 + index into `<name>_values`)."""
    values = pl.Series(name, [None, *cols[f"{name}_values"]], dtype=pl.String)
    return values.gather(np.frombuffer(cols[name], np.int32))


def _ints(cols: dict[str, Any], name: str) -> pl.Series:
    """An int64 column, NULL where its `_valid` byte is 0."""
    values = np.frombuffer(cols[name], np.int64)
    valid = np.frombuffer(cols[f"{name}_valid"], np.bool_)
    return pl.Series(name, values if valid.all() else np.ma.masked_array(values, ~valid), dtype=pl.Int64)


def _complete(cols: dict[str, Any]) -> pl.DataFrame:
    """The complete events, with `kind`, `_comm`, `_step` evaluated once per unique cat/name."""
    comm = np.frombuffer(cols["name_answers"], np.bool_).tolist()
    cats = category_facts([None, *cols["cat_values"]])[np.frombuffer(cols["cat"], np.int32)]
    names = name_facts([None, *cols["name_values"]], [False, *comm])[np.frombuffer(cols["name"], np.int32)]
    return pl.DataFrame(
        {
            "_row": np.arange(cats.height, dtype=np.int64),
            **cats.to_dict(),
            **names.to_dict(),
            "pid": _strings(cols, "pid"),
            "tid": _strings(cols, "tid"),
            **{column: _ints(cols, name) for column, name in _INT_COLUMNS.items()},
        }
    )


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


def _meta_rows(cols: dict[str, Any], side: dict[tuple[int, int], bytes]) -> list[MetaRow]:
    """The metadata events (kind, pid, tid, args.name when it is text); there are a few per thread."""
    texts = {}
    for column, values in (
        ("meta_name", "name_values"),
        ("meta_pid", "pid_values"),
        ("meta_tid", "tid_values"),
    ):
        strings = [None, *cols[values]]
        texts[column] = [strings[code] for code in memoryview(cols[column]).cast("i")]
    values = [_arg(side, i, "meta_name") for i in range(len(texts["meta_name"]))]
    return list(
        zip(
            texts["meta_name"],
            texts["meta_pid"],
            texts["meta_tid"],
            [v if type(v) is str else None for v in values],
            strict=True,
        )
    )
