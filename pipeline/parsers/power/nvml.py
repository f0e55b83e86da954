"""Parse the CSV that tracehouse's NVML sampler writes (vendor units, converted here once)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.common.limits import INT64_MAX, INT64_MIN
from tracehouse.pipeline.common.power_log import (
    NVML_CLOCK,
    NVML_COLUMNS,
    NVML_HEADER,
    NVML_IDENTITY_COLUMNS,
    NVML_IDENTITY_HEADER,
)
from tracehouse.pipeline.parsers.power.common import divided, finish_frame

INTEGER = re.compile(r"[+-]?[0-9]{1,19}")
# NVML_COLUMNS (the format, shared with the sampler) with the type each is read as.
NVML_SCHEMA: dict[str, pl.DataType] = {
    **{name: pl.Int32 if name == "device" else pl.Int64 for name in NVML_COLUMNS},
    **dict.fromkeys(NVML_IDENTITY_COLUMNS, pl.String),
}


def parse_nvml_log(path: Path, text: str, facts: dict[str, str], *, host: str | None) -> pl.DataFrame:
    """POWER_SAMPLES rows from a tracehouse NVML log (header facts already read)."""
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    if not lines or lines[0].strip() not in (NVML_HEADER, NVML_IDENTITY_HEADER):
        raise PowerLogError(path, f"NVML log lacks its column header line {NVML_HEADER!r}")
    names = lines[0].strip().split(",")
    expected = len(names)
    for number, line in enumerate(lines[1:], start=2):
        if line.count(",") != expected - 1:
            raise PowerLogError(
                path, f"NVML log row {number} has {line.count(',') + 1} fields, not {expected}"
            )
    try:
        raw = pl.read_csv("\n".join(lines).encode(), schema={name: NVML_SCHEMA[name] for name in names})
    except (pl.exceptions.PolarsError, ValueError):
        raise PowerLogError(path, f"NVML log has a malformed row: {first_bad_cell(lines)}") from None
    if raw.select(pl.any_horizontal(pl.col("ts_unix_ns", "device").is_null()).any()).item():
        raise PowerLogError(path, "NVML log row without ts_unix_ns or device")
    frame = raw.select(
        "ts_unix_ns",
        "device",
        pl.col("temperature_c").cast(pl.Float64),
        pl.col("gpu_util_pct").cast(pl.Float64),
        pl.lit(facts.get("host"), dtype=pl.String).alias("host"),
    ).with_columns(
        divided(raw["power_mw"], 1000.0).alias("power_w"),
        divided(raw["energy_counter_mj"], 1000.0).alias("energy_counter_j"),
        divided(raw["mem_used_bytes"], float(1 << 20)).alias("mem_used_mib"),
    )
    return finish_frame(frame, host=host, source="nvml", clock=facts.get("clock", NVML_CLOCK))


def first_bad_cell(lines: list[str]) -> str:
    """Where an NVML log (header first) has a cell that is no int64 (the CSV reader's words are long)."""
    for number, line in enumerate(lines[1:], start=2):
        for name, cell in zip(NVML_COLUMNS, line.split(","), strict=False):
            text = cell.strip()
            if text and not (INTEGER.fullmatch(text) and INT64_MIN <= int(text) <= INT64_MAX):
                return f"row {number}: {name} {text[:40]!r} is not an int64"
    return "a cell is not an integer"
