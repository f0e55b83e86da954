"""The communication-related args of the few events collectives are built from.

Only events whose name can matter for COLLECTIVES are read (communication kernels,
`record_param_comms`, `nccl:*` / `gloo:*` annotations, `c10d::*` ops and tracehouse labels),
so the rare args never become full-length columns.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any

import msgspec
import polars as pl
from tracehouse.pipeline.parsers.kineto.limits import int32_or_none, int64_or_none

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


def per_value(
    values: pl.Series, fn: Callable[[str], Any], name: str, dtype: pl.DataType = pl.String
) -> pl.Series:
    """`fn` of each non-null value of a String Series, called once per distinct value (NULL stays NULL).

    For the few rows that collectives are built from (one per communication call). A Python
    dict lookup per row costs ~30 ns; a Polars `replace_strict` or `map_batches` costs about
    0.4 ms per call whatever the size, which was a large share of a small trace's parse.
    """
    cache: dict[str, Any] = {}

    def one(v: str | None) -> Any:
        if v is None:
            return None
        return cache[v] if v in cache else cache.setdefault(v, fn(v))

    return pl.Series(name, [one(v) for v in values.to_list()], dtype=dtype)


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


def comm_args_frame(xs: list[Any], raw: pl.DataFrame) -> pl.DataFrame:
    """The comm-related args of the candidate rows, keyed by `_row` (position among complete events)."""
    candidates = raw["_comm"].arg_true().to_list()
    return comm_args_rows(candidates, lambda i, attr: getattr(xs[i].args, attr))


def comm_args_rows(idx: list[int], arg: Callable[[int, str], Any]) -> pl.DataFrame:
    """COMM_ARGS rows for `idx`; `arg(row, attr)` is the decoded arg (raw JSON for Input Dims/type)."""
    records = [
        {
            "_row": i,
            "collective_name": _str(arg(i, "collective_name")),
            "in_nelems": int64_or_none(arg(i, "in_nelems")),
            "out_nelems": int64_or_none(arg(i, "out_nelems")),
            "group_size": int32_or_none(arg(i, "group_size")),
            "dtype": _str(arg(i, "dtype")),
            "pg_name": _str(arg(i, "pg_name")),
            "pg_desc": _str(arg(i, "pg_desc")),
            "seq": int64_or_none(arg(i, "seq")),
            "sequence_number": int64_or_none(arg(i, "sequence_number")),
            "numel": int64_or_none(input_numel(_decode_raw(arg(i, "input_dims")))),
            "input_type": input_dtype(_decode_raw(arg(i, "input_type"))),
        }
        for i in idx
    ]
    return pl.DataFrame(records, schema=COMM_ARGS)
