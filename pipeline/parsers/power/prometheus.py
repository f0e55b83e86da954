"""Parse dcgm-exporter's Prometheus text: one sample per GPU per scrape.

The exposition format carries a timestamp (ms) only when the scraper kept one. Without it
the file's modification time stands in (the moment the scrape was saved) and `clock` says
`file-mtime`.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.parsers.power.common import dcgm_number, samples_frame

SAMPLE_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+(-?\d+))?\s*$")
# A label starts after `{` or `,` (the lookbehind keeps findall linear on a long run of name characters).
LABEL = re.compile(r'(?<=[{,])\s*([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
# metric -> (POWER_SAMPLES column, divisor to its unit)
METRICS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),  # W
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_counter_j", 1000.0),  # mJ counter
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_pct", 1.0),
    "DCGM_FI_DEV_FB_USED": ("mem_used_mib", 1.0),  # MiB
}
INSTANCE_LABELS = ("GPU_I_ID", "GPU_I_PROFILE")  # MIG instance rows: not a whole GPU


def looks_like_prometheus(text: str) -> bool:
    """True when the text holds DCGM exporter samples."""
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            return line.startswith("DCGM_FI_") and SAMPLE_LINE.match(line) is not None
    return False


def parse_prometheus(path: Path, text: str, *, host: str | None) -> pl.DataFrame:
    """POWER_SAMPLES rows from dcgm-exporter Prometheus text."""
    samples: dict[tuple[int, str | None, int | None], dict[str, float | None]] = {}
    repeats: dict[tuple[int, str | None, int | None], int] = {}  # kept as repeated rows, to be counted
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        match = SAMPLE_LINE.match(line)
        if match is None:
            raise PowerLogError(path, f"line {number} is not a Prometheus sample")
        name, labels_text, value_text, stamp_ms = match.groups()
        labels = dict(LABEL.findall(labels_text or ""))
        if name not in METRICS or "gpu" not in labels or any(k in labels for k in INSTANCE_LABELS):
            continue
        column, divisor = METRICS[name]
        value = number_or_none(path, number, value_text)
        if stamp_ms is not None and len(stamp_ms) > 20:
            raise PowerLogError(path, f"line {number}: timestamp {stamp_ms[:20]}... is beyond int64")
        if not (labels["gpu"].isascii() and labels["gpu"].isdigit() and len(labels["gpu"]) <= 10):
            raise PowerLogError(path, f"line {number}: gpu label {labels['gpu'][:40]!r} is not a GPU index")
        key = (int(labels["gpu"]), labels.get("Hostname"), None if stamp_ms is None else int(stamp_ms))
        sample, value = samples.setdefault(key, {}), None if value is None else value / divisor
        if column in sample:  # the same series at the same time again
            if not _same(sample[column], value):
                raise PowerLogError(path, f"line {number}: a second {name} of GPU {key[0]} at one time")
            repeats[key] = repeats.get(key, 0) + 1
        sample[column] = value
    if not samples:
        raise PowerLogError(path, "Prometheus text has no whole-GPU DCGM_FI_DEV_* power samples")
    return to_frame(path, samples, repeats, host=host)


def _same(a: float | None, b: float | None) -> bool:
    return a == b or (a != a and b != b)  # NaN repeats NaN


def number_or_none(path: Path, number: int, text: str) -> float | None:
    """A sample value; None for NaN and DCGM's blank sentinels exported as numbers."""
    return dcgm_number(path, number, text, "value")


def to_frame(path: Path, samples: dict, repeats: dict, *, host: str | None) -> pl.DataFrame:
    """Turn {(gpu, host, ts_ms): {column: value}} into a POWER_SAMPLES frame (a repeated one repeated)."""
    mtime_ns = path.stat().st_mtime_ns
    stamped = {key[2] is not None for key in samples}
    if len(stamped) > 1:
        raise PowerLogError(path, "Prometheus text mixes samples with and without timestamps")
    columns: dict[str, list] = {"ts_unix_ns": [], "device": [], "host": []}
    for name, _ in METRICS.values():
        columns[name] = []
    for key, values in samples.items():
        gpu, file_host, ts_ms = key
        for _ in range(1 + repeats.get(key, 0)):
            columns["ts_unix_ns"].append(mtime_ns if ts_ms is None else ts_ms * 1_000_000)
            columns["device"].append(gpu)
            columns["host"].append(file_host)
            for name, _ in METRICS.values():
                columns[name].append(values.get(name))
    clock = "prometheus-timestamp" if stamped == {True} else "file-mtime"
    return samples_frame(path, columns, host=host, source="dcgm-exporter", clock=clock)
