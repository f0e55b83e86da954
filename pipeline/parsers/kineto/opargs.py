"""The host ops' args (OPS columns) as full-length columns of the raw frame, read alike on both paths.

`Sequence number` and `Fwd thread id` become Int64 (NULL unless a JSON integer within int64);
`Input Dims`, `Input type` and `Concrete Inputs` stay the JSON text as written (String; invalid
UTF-8 replaced by U+FFFD, as Python decodes it). The C scanner returns these args of every
complete event as packed byte ranges (`side_rows`), sliced here through one Arrow array over the
file's bytes; the msgspec path holds them as decoded values (`Any`) and `msgspec.Raw` texts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
from tracehouse.pipeline.parsers.kineto import arrow
from tracehouse.pipeline.parsers.kineto.limits import int64_or_none

# raw frame column -> structs.ARG_FIELDS attribute
INT_ARGS = {"sequence_number": "sequence_number", "fwd_thread_id": "fwd_thread_id"}
TEXT_ARGS = {"input_dims": "input_dims", "input_types": "input_type", "concrete_inputs": "concrete_inputs"}
OP_ARGS: dict[str, pl.DataType] = {
    **{c: pl.Int64 for c in INT_ARGS},
    **{c: pl.String for c in TEXT_ARGS},
}


def utf8_texts(binary: pl.Series) -> pl.Series:
    """Bytes as text; a value holding invalid UTF-8 has it replaced by U+FFFD (rare: per value)."""
    text = binary.cast(pl.String, strict=False)
    bad = (text.is_null() & binary.is_not_null()).arg_true()
    if bad.len():
        fixed = [v.decode("utf-8", errors="replace") for v in binary.gather(bad).to_list()]
        text = text.scatter(bad, fixed)
    return text


def int_texts(text: pl.Series) -> pl.Series:
    """JSON texts of integers within int64 as Int64; anything else (floats, strings, true) NULL.

    Polars reads only plain integer text as an integer ("1.0", "1e3", "true" and '"5"' are NULL),
    and the texts are valid JSON values (the scanner declines anything else).
    """
    return text.cast(pl.Int64, strict=False)


def decoded_op_args(arg: Any) -> dict[str, pl.Series]:
    """The OP_ARGS columns from the msgspec path's args; `arg(attr)` lists one arg of every event."""
    columns = {}
    for column, attr in INT_ARGS.items():
        values = arg(attr)
        if set(map(type, values)) <= {int, type(None)}:  # as written by Kineto: one C-level pass
            columns[column] = pl.Series(column, values, dtype=pl.Int64, strict=False)  # beyond int64: NULL
        else:
            columns[column] = pl.Series(column, list(map(int64_or_none, values)), dtype=pl.Int64)
    for column, attr in TEXT_ARGS.items():
        raw = [None if r is None else bytes(r) for r in arg(attr)]
        columns[column] = utf8_texts(pl.Series(column, raw, dtype=pl.Binary)).alias(column)
    return columns


def scanned_op_args(
    data: bytes, side_rows: bytes, field_ids: dict[str, int], height: int
) -> dict[str, pl.Series]:
    """The OP_ARGS columns from the scanner's packed (row, field, start, end, event) entries."""
    entries = np.frombuffer(side_rows, np.int64).reshape(-1, 5)
    buffer = pa.py_buffer(data)
    texts = {}
    for column, attr in {**INT_ARGS, **TEXT_ARGS}.items():
        mine = entries[entries[:, 1] == field_ids[attr]]
        last = np.append(mine[1:, 0] != mine[:-1, 0], True) if len(mine) else np.zeros(0, bool)
        mine = mine[last]  # a key repeated in one event's args: the last one counts, as in msgspec
        binary = _slices(buffer, mine[:, 2], mine[:, 3])
        full = pl.repeat(None, height, dtype=pl.String, eager=True).alias(column)
        texts[column] = full.scatter(mine[:, 0], utf8_texts(binary)) if len(mine) else full
    return {
        **{c: int_texts(texts[c]).alias(c) for c in INT_ARGS},
        **{c: texts[c] for c in TEXT_ARGS},
    }


def _slices(buffer: pa.Buffer, starts: np.ndarray, ends: np.ndarray) -> pl.Series:
    """data[start:end] for each pair, in order (ranges ascending, not overlapping): one Arrow take.

    The offsets start0, end0, start1, end1, ... make an array whose even items are the ranges
    and odd items the gaps between them; no copy until the take.
    """
    if len(starts) == 0:
        return pl.Series([], dtype=pl.Binary)
    offsets = np.empty(2 * len(starts), np.int64)
    offsets[0::2], offsets[1::2] = starts, ends
    pieces = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), buffer]
    )
    taken = pieces.take(arrow.int64s(np.arange(0, len(offsets) - 1, 2)))  # not pa.array: it imports pandas
    return pl.Series(pl.from_arrow(taken)).cast(pl.Binary)
