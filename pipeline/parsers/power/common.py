"""What every power-log parser shares: DCGM sentinels and the output frame (the log header is
`tracehouse.pipeline.common.power_log`)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.schema import POWER_SAMPLES

# DCGM marks a missing value with numbers at the top of the type's range (dcgm_structs.h):
# DCGM_INT64_BLANK = 0x7ffffffffffffff0 (and BLANK+1.. NOT_FOUND, NOT_SUPPORTED, ...),
# DCGM_FP64_BLANK = 2**47 = 140737488355328.0 (and +1, +2, +3).
INT64_BLANK = 0x7FFFFFFFFFFFFFF0
FP64_BLANK = 140737488355328.0
FP64_BLANK_SPAN = 16.0


def is_dcgm_blank(value: float) -> bool:
    """True when a DCGM number is one of its 'blank / not found / not supported' sentinels."""
    if isinstance(value, int):
        return value >= INT64_BLANK
    return FP64_BLANK <= value < FP64_BLANK + FP64_BLANK_SPAN or value >= float(INT64_BLANK)


def dcgm_number(path: Path, number: int, text: str, what: str) -> float | None:
    """A DCGM value (int or float text) as a float; None for NaN and DCGM's blank sentinels."""
    try:
        value: float = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise PowerLogError(path, f"line {number}: {what} {text!r} is not a number") from None
    return None if value != value or is_dcgm_blank(value) else float(value)


def divided(series: pl.Series, divisor: float) -> pl.Series:
    """series / divisor, correctly rounded (polars gives 59/1000 = 0.059000000000000004)."""
    values = series.cast(pl.Float64).to_numpy() / divisor  # NULL -> NaN -> NULL again below
    return pl.Series(series.name, values, dtype=pl.Float64).fill_nan(None)


def samples_frame(columns: dict[str, list], *, host: str | None, source: str, clock: str) -> pl.DataFrame:
    """A POWER_SAMPLES frame from per-column lists (missing columns become NULL)."""
    height = len(columns["ts_unix_ns"])
    data = {
        name: columns.get(name, [None] * height) for name in POWER_SAMPLES if name not in ("source", "clock")
    }
    frame = pl.DataFrame(data, schema={k: v for k, v in POWER_SAMPLES.items() if k in data})
    return finish_frame(frame, host=host, source=source, clock=clock)


def finish_frame(frame: pl.DataFrame, *, host: str | None, source: str, clock: str) -> pl.DataFrame:
    """Add the constant columns, cast to POWER_SAMPLES and order by (device, time).

    A host the file names wins; `host` fills rows where the file names none.
    """
    fill_host = pl.lit(host, dtype=pl.String)
    host_col = pl.col("host").cast(pl.String).fill_null(fill_host) if "host" in frame.columns else fill_host
    frame = frame.with_columns(
        host_col.alias("host"),
        pl.lit(source, dtype=pl.String).alias("source"),
        pl.lit(clock, dtype=pl.String).alias("clock"),
    )
    return frame.select([pl.col(name).cast(dtype) for name, dtype in POWER_SAMPLES.items()]).sort(
        ["device", "ts_unix_ns"], nulls_last=True, maintain_order=True
    )
