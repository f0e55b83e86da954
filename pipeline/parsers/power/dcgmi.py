"""Parse `dcgmi dmon` output as tracehouse's sampler writes it: each line prefixed `<unix_ns>\\t`."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.common.gpu_identity import VISIBLE_FACT
from tracehouse.pipeline.common.power_log import DCGMI_CLOCK
from tracehouse.pipeline.parsers.power.common import as_cuda_ordinals, dcgm_number, samples_frame

# dmon column name (DCGM's short name) -> (POWER_SAMPLES column, divisor to its unit).
# 1002 SMACT, 1004 TENSO, 1005 DRAMA are read but have no column in POWER_SAMPLES yet.
DMON_COLUMNS: dict[str, tuple[str, float]] = {
    "POWER": ("power_w", 1.0),  # field 155, W
    "TOTEC": ("energy_counter_j", 1000.0),  # field 156, mJ counter
    "TMPTR": ("temperature_c", 1.0),  # field 150, C
    "GPUTL": ("gpu_util_pct", 1.0),  # field 203, %
    "FBUSD": ("mem_used_mib", 1.0),  # field 252, MiB
}
INT64_DIGITS = 19  # longer digit strings are beyond int64 (and Python's int() may refuse them)
MISSING_TEXT = {"N/A", "N/W"}  # not available / not watched
UNSTAMPED_REASON = (
    "dcgmi dmon prints no timestamps; record it with tracehouse's sampler "
    "(tracehouse.collectors.power.capture_power, source='dcgmi')"
)


def is_dmon_header(body: str) -> bool:
    """True for dmon's field-name header line (`#Entity ...` or `# Entity ...`)."""
    return body.lstrip("#").lstrip().startswith("Entity") and body.startswith("#")


def parse_value(path: Path, number: int, text: str) -> float | None:
    """One dmon cell as a number; None for N/A and DCGM's blank sentinels."""
    if text in MISSING_TEXT:
        return None
    return dcgm_number(path, number, text, "dmon value")


def parse_dcgmi_log(path: Path, text: str, facts: dict[str, str], *, host: str | None) -> pl.DataFrame:
    """POWER_SAMPLES rows from a stamped dcgmi dmon log (header facts already read)."""
    columns: dict[str, list] = {"ts_unix_ns": [], "device": [], **{c: [] for c, _ in DMON_COLUMNS.values()}}
    fields: list[str] | None = None
    messages: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line or line.startswith("#"):
            continue
        stamp, tab, body = line.partition("\t")
        if not tab or not (stamp.isascii() and stamp.isdigit()):
            raise PowerLogError(path, f"line {number} lacks the sampler's '<unix_ns>\\t' stamp")
        tokens = body.split()
        if not tokens or tokens[0] in ("ID", "Id"):
            continue  # blank, or the units line under the header
        if is_dmon_header(body):
            fields = body.lstrip("#").split()[1:]
            continue
        if len(stamp) > INT64_DIGITS:
            raise PowerLogError(path, f"line {number}: stamp {stamp[:20]}... is beyond int64 ns")
        if len(tokens) < 2 or not (tokens[1].isascii() and tokens[1].isdigit()):
            messages.append(body.strip())  # e.g. "Error setting watches. Result: ..."
            continue
        if fields is None:
            raise PowerLogError(path, f"line {number}: dmon data before any '#Entity' header")
        if len(tokens) != 2 + len(fields):
            raise PowerLogError(
                path, f"line {number}: {len(tokens) - 2} dmon values for {len(fields)} fields (truncated?)"
            )
        if tokens[0] != "GPU":
            continue  # GPU-I / GPU-CI / Switch entities: power is per GPU
        if len(tokens[1]) > INT64_DIGITS:
            raise PowerLogError(path, f"line {number}: GPU {tokens[1][:20]}... is beyond int32")
        append_row(
            path, number, columns, int(stamp), int(tokens[1]), dict(zip(fields, tokens[2:], strict=True))
        )
    if not columns["ts_unix_ns"]:
        detail = f"dcgmi said: {messages[0][:200]}" if messages else "no GPU rows"
        raise PowerLogError(path, f"dcgmi dmon log has no samples ({detail})")
    visible = facts.get(VISIBLE_FACT)
    if visible is not None and "GPU-" not in visible and "MIG-" not in visible:
        # DCGM's GPU ids are NVML's indices; a dmon log names no UUID, so only indices map.
        columns = as_cuda_ordinals(path, columns, [("", "")] * len(columns["device"]), visible)
    return samples_frame(
        path, columns, host=facts.get("host") or host, source="dcgmi", clock=facts.get("clock", DCGMI_CLOCK)
    )


def append_row(
    path: Path, number: int, columns: dict[str, list], ts: int, device: int, cells: dict[str, str]
) -> None:
    """Append one GPU row's known fields (unknown fields are ignored)."""
    columns["ts_unix_ns"].append(ts)
    columns["device"].append(device)
    for short, (column, divisor) in DMON_COLUMNS.items():
        value = parse_value(path, number, cells[short]) if short in cells else None
        if value is not None and column == "gpu_util_pct" and not 0.0 <= value <= 100.0:
            value = None  # DCGM sometimes reports 4294967295 or 1k-200k for utilisation
        columns[column].append(None if value is None else value / divisor)
