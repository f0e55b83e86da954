"""Arrow arrays and scalars from Python or numpy values, without pyarrow's own conversion.

pyarrow converts Python values (`pa.array`, `pa.scalar`, a Python value passed to a
`pyarrow.compute` function) on a path that first imports pandas when it is installed: 0.15 to
0.2 s once per process, measured on the dev VM (2026-12-04), on the parse's critical path and
under the GIL, where it stalls the other threads' tasks. The collectives code builds its few
arrow values here instead: Python values through polars, numpy values from their buffers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa


def array(values: Sequence[Any], dtype: pa.DataType) -> pa.Array:
    """`values` (Python values, None as NULL) as an arrow array of `dtype`."""
    polars_type = pl.from_arrow(pa.nulls(0, type=dtype)).dtype
    return pl.Series(values, dtype=polars_type).to_arrow().cast(dtype)


def scalar(value: Any, dtype: pa.DataType) -> pa.Scalar:
    """One Python value as an arrow scalar of `dtype`."""
    return array([value], dtype)[0]


def int64s(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A numpy integer array as int64, NULL where `valid` is False."""
    data = pa.py_buffer(np.ascontiguousarray(values, dtype=np.int64))
    if valid is None or valid.all():
        return pa.Array.from_buffers(pa.int64(), len(values), [None, data])
    nulls = int((~valid).sum())
    return pa.Array.from_buffers(pa.int64(), len(values), [_bits(valid), data], null_count=nulls)


def bools(values: np.ndarray) -> pa.Array:
    """A numpy boolean array as arrow (a filter mask)."""
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, _bits(values)])


def validity(flags: np.ndarray) -> pa.Buffer:
    """A validity bitmap (True: the value is present)."""
    return _bits(flags)


def _bits(flags: np.ndarray) -> pa.Buffer:
    """Booleans as arrow's bit-packed layout (a validity bitmap or boolean data)."""
    return pa.py_buffer(np.packbits(np.asarray(flags, dtype=bool), bitorder="little"))


def numpy(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An arrow array as numpy, through polars (zero-copy for numbers without NULLs)."""
    return pl.Series(values).to_numpy()
