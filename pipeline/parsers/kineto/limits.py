"""The limits `parse_trace` holds every input to (both decoders read them); their numbers live in
`pipeline/common/limits.py`, beside the manifest, power-log and nccl-tests limits.

A value outside its limit is an error (`TraceFormatError`, naming the field and the value)
where it describes the whole rank (top-level fields, times); an event arg outside its
column's range is NULL (one odd arg should not lose a rank), as documented in `parse`.

* MAX_DEPTH: JSON arrays and objects nested at most this deep (the document's own
  top-level object or array is level 1). Real Kineto traces nest about 7 deep; the limit
  keeps msgspec well inside Python's recursion limit and the C scanner's stack bounded.
* MAX_TIME_US: |ts| and |dur| of a complete event below 2^53 µs (≈ 285 years): the float
  path is exact there and nanoseconds fit int64.
* Times in ns after adding `baseTimeNanoseconds`: `ts_unix_ns` and `ts_unix_ns + dur_ns`
  within int64 (years 1677-2262), as the warehouse stores them (BIGINT).
* Integers the warehouse stores as INTEGER (rank, world_size, schemaVersion, pg_size,
  ranks, group size) within int32; BIGINT columns within int64.
* MAX_INT_CHARS: an integer literal longer than 4,300 characters is out of range (msgspec's
  limit), and so is a number beyond double range (1e400), wherever msgspec decodes it (any
  event's ts/dur/pid/tid, the args that become columns, the top-level fields), as msgspec
  reports it; the C scanner declines those documents, so the msgspec path words the error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.common.limits import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    MAX_INT_CHARS,
    MAX_TIME_US,  # noqa: F401 (read from here by the trace parser)
)

SCANNER_LIMITS = (MAX_DEPTH, MAX_INT_CHARS)  # what the C scanner is told
DEPTH_ERROR = f"JSON arrays/objects nested deeper than {MAX_DEPTH} levels"


def int64_or_none(value: Any) -> int | None:
    """The value if it is an integer that fits an Int64 column, else None (text, float, > 64 bits)."""
    return value if type(value) is int and INT64_MIN <= value <= INT64_MAX else None


def int64_product(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """a * b as Int64, NULL where the product would leave int64 (Polars wraps it silently).

    Decided on the float product with a margin, so a product within ~10^4 of the edge is NULL too.
    """
    fits = (a.cast(pl.Float64) * b.cast(pl.Float64)).abs() < 2.0**63 * (1 - 2.0**-49)
    return pl.when(fits).then(a * b)


def int32_or_none(value: Any) -> int | None:
    """The value if it is an integer that fits an Int32 column, else None."""
    return value if type(value) is int and INT32_MIN <= value <= INT32_MAX else None


def shown(value: int) -> str:
    """An integer for a one-line message: in full up to 40 digits, else its first digits and length.

    Integers come from msgspec (at most MAX_INT_CHARS characters), within `str`'s default limit.
    """
    try:
        text = str(value)
    except ValueError:  # the interpreter's int/str digit limit was lowered
        return f"an integer of {value.bit_length()} bits"
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text.lstrip('-'))} digits)"


def in_range(path: Path, field: str, value: int | None, low: int, high: int) -> int | None:
    """The value, or TraceFormatError naming `field` when it lies outside [low, high]."""
    if value is not None and not low <= value <= high:
        kind = "int32" if (low, high) == (INT32_MIN, INT32_MAX) else "int64"
        raise TraceFormatError(path, f"{field} {shown(value)} is out of range ({kind})")
    return value
