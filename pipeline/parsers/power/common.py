"""What every power-log parser shares: DCGM sentinels and the output frame (the log header is
`tracehouse.pipeline.common.power_log`)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.common.gpu_identity import VISIBLE_FACT, PhysicalGpu, cuda_ordinals
from tracehouse.pipeline.common.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, POWER_RANGES
from tracehouse.pipeline.warehouse.schema import POWER_SAMPLES

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
    # the int64 sentinels printed as a double all round to 2^63; a larger number is just out of range
    return FP64_BLANK <= value < FP64_BLANK + FP64_BLANK_SPAN or value == float(INT64_BLANK)


def dcgm_number(path: Path, number: int, text: str, what: str) -> float | None:
    """A DCGM value (int or float text) as a float; None for DCGM's blank sentinels (NaN stays NaN)."""
    try:
        value: float = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise PowerLogError(path, f"line {number}: {what} {text[:40]!r} is not a number") from None
    return None if is_dcgm_blank(value) else float(value)


def divided(series: pl.Series, divisor: float) -> pl.Series:
    """series / divisor, correctly rounded (polars gives 59/1000 = 0.059000000000000004)."""
    values = series.cast(pl.Float64).to_numpy() / divisor  # NULL -> NaN -> NULL again below
    return pl.Series(series.name, values, dtype=pl.Float64).fill_nan(None)


def samples_frame(
    path: Path, columns: dict[str, list], *, host: str | None, source: str, clock: str
) -> pl.DataFrame:
    """A POWER_SAMPLES frame from per-column lists (missing columns become NULL).

    A time or device index the warehouse cannot store (beyond int64 ns or int32) fails the file.
    """
    height = len(columns["ts_unix_ns"])
    for name, low, high, what in (
        ("ts_unix_ns", INT64_MIN, INT64_MAX, "ns is beyond int64 (the years 1677-2262)"),
        ("device", INT32_MIN, INT32_MAX, "is beyond int32"),
    ):
        for value in columns[name]:
            if value is not None and not low <= value <= high:
                raise PowerLogError(path, f"{name} {str(value)[:40]} {what}")
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


def checked_samples(path: Path, frame: pl.DataFrame) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """The samples whose every value lies in its POWER_RANGES, less exact repeats; why others were dropped.

    A sample is a row of a time series, so one bad reading drops that row only, counted in the
    returned lines (the file's warnings); a log with no sample left fails.
    """
    outside = {
        name: pl.col(name).cast(pl.Float64).is_between(low, high).not_().fill_null(False)
        for name, (low, high) in POWER_RANGES.items()
    }
    counts = frame.select(
        pl.any_horizontal(*outside.values()).sum().alias("_any"),
        *(e.sum().alias(n) for n, e in outside.items()),
    ).row(0, named=True)
    kept = frame.filter(pl.any_horizontal(*outside.values()).not_()) if counts["_any"] else frame
    unique = kept.unique(maintain_order=True)
    lines = []
    if counts["_any"]:
        detail = ", ".join(
            f"{name} outside {_shown_range(name)} ({n})" for name, n in counts.items() if name != "_any" and n
        )
        lines.append(f"{counts['_any']} of {frame.height} samples dropped: {detail}")
    if repeats := kept.height - unique.height:
        lines.append(f"{repeats} repeated samples dropped (same device, time and values)")
    if unique.height == 0:
        raise PowerLogError(path, f"power log has no sample in range ({'; '.join(lines)})")
    return unique, tuple(lines)


def _shown_range(name: str) -> str:
    low, high = POWER_RANGES[name]
    return f"[{low:g}, {high:g}]"


def as_cuda_ordinals(
    path: Path, columns: dict[str, list], identities: list[tuple[str, str]], visible: str
) -> dict[str, list]:
    """The rows of the GPUs the run saw (CUDA_VISIBLE_DEVICES as the sampler recorded it), their
    `device` the CUDA ordinal, as Kineto numbers it; other GPUs' rows (other jobs') are dropped."""
    gpus = {
        PhysicalGpu(index=device, uuid=uuid, pci_bus_id=bus)
        for device, (uuid, bus) in zip(columns["device"], identities, strict=True)
    }
    if len({gpu.index for gpu in gpus}) != len(gpus):
        raise PowerLogError(path, "one GPU index names two GPUs (uuid or pci.bus_id differ)")
    ordinal = cuda_ordinals(visible, gpus)
    keep = [i for i, device in enumerate(columns["device"]) if device in ordinal]
    if not keep:
        raise PowerLogError(path, f"no logged GPU is one of {VISIBLE_FACT}={visible[:80]!r}")
    kept = {name: [values[i] for i in keep] for name, values in columns.items()}
    kept["device"] = [ordinal[device] for device in kept["device"]]
    return kept
