"""The communication-related args of the few events collectives are built from.

Only events whose name can matter for COLLECTIVES are read (communication kernels,
`record_param_comms`, `nccl:*` / `gloo:*` annotations, `c10d::*` ops and tracehouse labels),
so the rare args never become full-length columns.

Column-wise: each arg's decoded values become one typed Series (a C-level pass when every
value has the column's type, as in real traces; per value only when some value does not), and
`Input Dims` / `Input type` are read once per distinct JSON text (a trace repeats a few shapes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from math import prod
from operator import attrgetter
from typing import Any

import msgspec
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from tracehouse.pipeline.parsers.kineto import arrow
from tracehouse.pipeline.parsers.kineto.limits import int64_or_none

_NOT_DTYPES = ("Scalar", "ScalarList", "TensorList", "GenericList")

COMM_ARGS: dict[str, pl.DataType] = {
    "_row": pl.Int64,
    "collective_name": pl.String,
    "in_nelems": pl.Int64,
    "out_nelems": pl.Int64,
    "group_size": pl.Int64,  # values within int32 (COLLECTIVES.group_size), else NULL
    "dtype": pl.String,
    "pg_name": pl.String,
    "pg_desc": pl.String,
    "seq": pl.Int64,  # args["Seq"]
    "sequence_number": pl.Int64,  # args["Sequence number"] (autograd's on most ops)
    "numel": pl.Int64,  # elements of the tensors in `Input Dims` (see input_numel)
    "input_type": pl.String,  # first non-empty, non-container entry of `Input type`
}
# The decoded args (structs.ARG_FIELDS attributes) read, by how each becomes its column.
TEXT_ARGS = ("collective_name", "dtype", "pg_name", "pg_desc")  # text, or an integer as text
INT_ARGS = ("in_nelems", "out_nelems", "group_size", "seq", "sequence_number")
RAW_ARGS = ("input_dims", "input_type")  # raw JSON text
ARGS = (*TEXT_ARGS, *INT_ARGS, *RAW_ARGS)
_NONE = type(None)


def per_distinct(values: Any, derived: dict[str, tuple[Callable[[Any], Any], pa.DataType]]) -> dict[str, Any]:
    """Per output name, `fn` of each of `values` (an arrow array), NULL where the value is NULL.

    For the columns of the few communication events: a trace repeats a handful of names,
    dtypes and shapes, so each `fn` (plain Python) runs once per distinct value, and the rows
    take their results by their value's index among the distinct ones (pyarrow: microseconds).
    """
    distinct = [v for v in dict.fromkeys(values.to_pylist()) if v is not None]
    codes = pc.index_in(values, value_set=arrow.array(distinct, values.type))
    return {
        out: pc.take(arrow.array([fn(v) for v in distinct], dtype), codes)
        for out, (fn, dtype) in derived.items()
    }


def _decode_raw(raw: Any) -> Any:
    if raw is None:
        return None
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None


def input_numel(dims: Any) -> int | None:
    """Elements of the first tensor argument: a shape `[d0, d1]`, or a TensorList `[[d0], [d1]]` (summed)."""
    if not isinstance(dims, list):
        return None
    for entry in dims:
        if not isinstance(entry, list) or not entry:
            continue
        if all(type(d) is int for d in entry):
            return prod(entry)
        if all(isinstance(t, list) and all(type(d) is int for d in t) for t in entry):
            return sum(prod(t) for t in entry)
    return None


def input_dtype(types: Any) -> str | None:
    """The first tensor dtype named in `Input type` (skipping "", "Scalar", "TensorList"...)."""
    if not isinstance(types, list):
        return None
    for entry in types:
        if isinstance(entry, str) and entry and entry not in _NOT_DTYPES:
            return entry
    return None


def _str(v: Any) -> str | None:
    if isinstance(v, str):
        return v
    return str(v) if type(v) is int else None


def _texts(name: str, values: list[Any]) -> pl.Series:
    """A text arg as String: text as it is, an integer as its digits, anything else NULL."""
    if set(map(type, values)) <= {str, _NONE}:
        return pl.Series(name, values, dtype=pl.String)
    return pl.Series(name, [_str(v) for v in values], dtype=pl.String)  # a trace with odd types


def _ints(name: str, values: list[Any]) -> pl.Series:
    """An integer arg as Int64: NULL unless an integer within int64 (text, bool, float, > 64 bits)."""
    if set(map(type, values)) <= {int, _NONE}:
        try:
            return pl.Series(name, values, dtype=pl.Int64)
        except (TypeError, OverflowError, pl.exceptions.PolarsError):  # an integer beyond int64
            pass
    return pl.Series(name, [int64_or_none(v) for v in values], dtype=pl.Int64)


def _numel(raw: bytes) -> int | None:
    return int64_or_none(input_numel(_decode_raw(raw)))


def _input_type(raw: bytes) -> str | None:
    return input_dtype(_decode_raw(raw))


def _binary(values: list[Any]) -> pa.Array:
    """Raw JSON texts as binary (the msgspec path holds them as msgspec.Raw: copied to bytes)."""
    if not set(map(type, values)) <= {bytes, _NONE}:
        values = [None if v is None else bytes(v) for v in values]
    return arrow.array(values, pa.large_binary())


def comm_args_columns(rows: Sequence[int], values: dict[str, list[Any]]) -> pl.DataFrame:
    """COMM_ARGS of `rows`; `values[attr]`: each row's decoded arg `attr` (raw JSON for RAW_ARGS)."""
    if not rows:
        return pl.DataFrame(schema=COMM_ARGS)
    raw = {a: _binary(values[a]) for a in RAW_ARGS}
    columns = {
        "_row": pl.Series("_row", rows, dtype=pl.Int64),
        **{a: _texts(a, values[a]) for a in TEXT_ARGS},
        **{a: _ints(a, values[a]) for a in INT_ARGS},
        **per_distinct(raw["input_dims"], {"numel": (_numel, pa.int64())}),
        **per_distinct(raw["input_type"], {"input_type": (_input_type, pa.large_string())}),
    }
    # Within int32 or NULL: a non-strict cast nulls what does not fit.
    columns["group_size"] = columns["group_size"].cast(pl.Int32, strict=False).cast(pl.Int64)
    return pl.DataFrame([pl.Series(c, columns[c]) for c in COMM_ARGS])


def comm_args_frame(xs: list[Any], raw: pl.DataFrame) -> pl.DataFrame:
    """The comm-related args of the candidate rows, keyed by `_row` (position among complete events)."""
    candidates = raw["_comm"].arg_true().to_list()
    args = list(map(attrgetter("args"), map(xs.__getitem__, candidates)))
    return comm_args_columns(candidates, {a: list(map(attrgetter(a), args)) for a in ARGS})


def comm_args_rows(idx: list[int], arg: Callable[[int, str], Any]) -> pl.DataFrame:
    """COMM_ARGS rows for `idx`; `arg(row, attr)` is the decoded arg (raw JSON for Input Dims/type).

    The scanner's interface (`fastscan`): `arg` runs once per row and arg; the rest is column-wise.
    """
    return comm_args_columns(idx, {a: list(map(arg, idx, repeat(a))) for a in ARGS})
