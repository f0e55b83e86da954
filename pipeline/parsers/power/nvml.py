"""Parse the CSV that tracehouse's NVML sampler writes (vendor units, converted here once)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.common.power_log import NVML_CLOCK, NVML_COLUMNS, NVML_HEADER
from tracehouse.pipeline.parsers.power.common import divided, finish_frame

# NVML_COLUMNS (the format, shared with the sampler) with the type each is read as.
NVML_SCHEMA: dict[str, pl.DataType] = {
    name: pl.Int32 if name == "device" else pl.Int64 for name in NVML_COLUMNS
}


def parse_nvml_log(path: Path, text: str, facts: dict[str, str], *, host: str | None) -> pl.DataFrame:
    """POWER_SAMPLES rows from a tracehouse NVML log (header facts already read)."""
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    if not lines or lines[0].strip() != NVML_HEADER:
        raise PowerLogError(path, f"NVML log lacks its column header line {NVML_HEADER!r}")
    expected = len(NVML_COLUMNS)
    for number, line in enumerate(lines[1:], start=2):
        if line.count(",") != expected - 1:
            raise PowerLogError(
                path, f"NVML log row {number} has {line.count(',') + 1} fields, not {expected}"
            )
    try:
        raw = pl.read_csv("\n".join(lines).encode(), schema=NVML_SCHEMA)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise PowerLogError(path, f"NVML log has a malformed row: {exc}") from exc
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
