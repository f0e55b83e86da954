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
    """Bytes as text; a value holding invalid UTF-8 has it replaced by U+FFFD.

    One cast when every value is valid UTF-8; otherwise (rare: a damaged file) each value is decoded
    in Python. Polars either raises on invalid UTF-8 (2.x) or gives NULL (1.x, not strict): the
    strict cast raises on both.
    """
    try:
        return binary.cast(pl.String)
    except pl.exceptions.PolarsError:
        decoded = [None if v is None else v.decode("utf-8", errors="replace") for v in binary.to_list()]
        return pl.Series(binary.name, decoded, dtype=pl.String)


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
        texts[column] = utf8_texts(_column(buffer, height, mine[:, 0], mine[:, 2], mine[:, 3])).alias(column)
    return {
        **{c: int_texts(texts[c]).alias(c) for c in INT_ARGS},
        **{c: texts[c] for c in TEXT_ARGS},
    }


def _column(
    buffer: pa.Buffer, height: int, rows: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> pl.Series:
    """A Binary column of `height` rows: data[start:end] at each of `rows` (ascending), NULL elsewhere.

    The offsets start0, end0, start1, end1, ... over the file's bytes make an array whose even
    items are the ranges (the odd ones the gaps between them); one Arrow take copies the ranges
    out, and their lengths placed at their rows give the full column's offsets (no scatter).
    """
    if len(rows) == 0:
        return pl.repeat(None, height, dtype=pl.Binary, eager=True)
    offsets = np.empty(2 * len(starts), np.int64)
    offsets[0::2], offsets[1::2] = starts, ends
    pieces = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), buffer]
    )
    taken = pieces.take(arrow.int64s(np.arange(0, len(offsets) - 1, 2)))  # not pa.array: it imports pandas
    first = int(np.frombuffer(taken.buffers()[1], np.int64)[taken.offset])  # where its values start
    lengths = np.zeros(height, np.int64)
    lengths[rows] = ends - starts
    full_offsets = np.zeros(height + 1, np.int64)
    np.cumsum(lengths, out=full_offsets[1:])
    present = np.zeros(height, bool)
    present[rows] = True
    column = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(),
        height,
        [arrow.validity(present), pa.py_buffer(full_offsets), taken.buffers()[2].slice(first)],
        null_count=height - len(rows),
    )
    return pl.Series(pl.from_arrow(column)).cast(pl.Binary)
