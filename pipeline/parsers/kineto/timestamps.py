"""Kineto `ts`/`dur` (µs, int or float with ns decimals) to exact integer nanoseconds.

Float path: `ns = floor(ts)·1000 + round(frac(ts)·1000)`. Splitting off the integer part
keeps the float error below 0.5 ns as long as ts < 2^43 µs (≈ 101 days), which holds for
every timestamp relative to `baseTimeNanoseconds` and for integer epoch µs (exact below 2^53).
Absolute-epoch FLOAT timestamps (≈1.7e15 µs with 3 decimals: 19 significant digits) do not
fit a float64; a batch of events holding such a timestamp (≥ 2^43 µs and written as a JSON
float) has its `ts`/`dur` re-read as JSON text and converted exactly (`text_to_ns`).
"""

from __future__ import annotations

from typing import Any

import polars as pl

EXACT_FLOAT_LIMIT_US = float(2**43)


def float_to_ns(us: pl.Expr) -> pl.Expr:
    """µs as Float64 to Int64 ns, exact for |us| < 2^43 and for integer-valued us < 2^53."""
    whole = us.floor()
    return whole.cast(pl.Int64) * 1000 + ((us - whole) * 1000).round().cast(pl.Int64)


def needs_text_path(ts_us: pl.Series, written: list[Any]) -> bool:
    """True when some timestamp is too large for the float path and was written as a JSON float.

    `written` holds the decoded values (int for JSON integers, float for decimals): a float
    value cannot tell whether its text had decimals (1.85e15 + .875 rounds to an integer).
    """
    return bool((ts_us.abs() >= EXACT_FLOAT_LIMIT_US).any()) and float in set(map(type, written))


def text_to_ns(text: pl.Expr) -> pl.Expr:
    """A decimal µs string ("1712195495519689.047", "12", "-0.5", "1.5e3") to Int64 ns, exact.

    Rounds half away from zero at the 4th decimal. Exponent notation (never written by
    Kineto) goes through float64.
    """
    parts = text.str.extract_groups(r"^\s*(-?)(\d*)(?:\.(\d*))?\s*$")
    sign = pl.when(parts.struct[0] == "-").then(-1).otherwise(1)
    whole = parts.struct[1].replace("", "0").cast(pl.Int64, strict=False).fill_null(0)
    decimals = parts.struct[2].fill_null("").str.pad_end(4, "0")
    milli = decimals.str.slice(0, 3).cast(pl.Int64)
    round_up = (decimals.str.slice(3, 1).cast(pl.Int64) >= 5).cast(pl.Int64)
    exact = sign * (whole * 1000 + milli + round_up)
    fallback = float_to_ns(text.cast(pl.Float64, strict=False))
    return pl.when(parts.struct[1].is_not_null()).then(exact).otherwise(fallback)
