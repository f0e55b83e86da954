"""Read any supported GPU power log into POWER_SAMPLES rows: detect the format by content, dispatch."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.common.power_log import LOG_MAGIC, parse_log_header
from tracehouse.pipeline.parsers.power.common import checked_samples
from tracehouse.pipeline.parsers.power.dcgmi import UNSTAMPED_REASON, is_dmon_header, parse_dcgmi_log
from tracehouse.pipeline.parsers.power.nvidia_smi import (
    BUNDLE_SECTION,
    is_query_gpu_header,
    parse_nvidia_smi_log,
)
from tracehouse.pipeline.parsers.power.nvml import parse_nvml_log
from tracehouse.pipeline.parsers.power.prometheus import looks_like_prometheus, parse_prometheus

EXPECTED = "expected a tracehouse sampler log, nvidia-smi --query-gpu CSV or dcgm-exporter Prometheus text"


@dataclass(frozen=True)
class PowerLog:
    """One power log's samples and why some were dropped (one line each, for the file's warnings)."""

    frame: pl.DataFrame
    dropped: tuple[str, ...]


def parse_power_log(path: Path, *, host: str | None = None) -> pl.DataFrame:
    """Parse one power log into a frame with exactly the POWER_SAMPLES columns.

    `host` names the machine for rows whose file does not name one. Samples outside their
    range (`common.limits.POWER_RANGES`) and exact repeats are dropped: `read_power_log` says how many.
    """
    return read_power_log(path, host=host).frame


def read_power_log(path: Path, *, host: str | None = None) -> PowerLog:
    """Parse one power log; its samples in range and one line per kind of sample dropped."""
    path = Path(path)
    frame, dropped = checked_samples(path, _parse_any(path, host))
    return PowerLog(frame=frame, dropped=dropped)


def _parse_any(path: Path, host: str | None) -> pl.DataFrame:
    """Every sample of the log, in whichever format its content says."""
    text = read_text(path)
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise PowerLogError(path, "empty power log")
    first = lines[0]
    if first.startswith(LOG_MAGIC):
        return parse_sampler_log(path, text, parse_log_header(path, first), host=host)
    if any(BUNDLE_SECTION.match(line) for line in lines):
        return parse_nvidia_smi_log(path, text, {}, host=host)
    if looks_like_prometheus(text):
        return parse_prometheus(path, text, host=host)
    data_lines = [line for line in lines if not line.startswith("#")]
    if data_lines and is_query_gpu_header(data_lines[0]):
        return parse_nvidia_smi_log(path, text, {}, host=host)
    raise PowerLogError(path, unreadable_reason(lines))


def parse_sampler_log(path: Path, text: str, facts: dict[str, str], *, host: str | None) -> pl.DataFrame:
    """Dispatch a log written by a tracehouse sampler on the source its header names."""
    source = facts.get("source")
    if source == "nvml":
        return parse_nvml_log(path, text, facts, host=host)
    if source == "dcgmi":
        return parse_dcgmi_log(path, text, facts, host=host)
    if source == "nvidia-smi":
        return parse_nvidia_smi_log(path, text, facts, host=host, stamped=True)
    raise PowerLogError(path, f"tracehouse power log names an unknown source {str(source)[:40]!r}")


def unreadable_reason(lines: list[str]) -> str:
    """Why a file is not a power log, as specific as its first lines allow."""
    if any(is_dmon_header(line) for line in lines[:50]):
        return UNSTAMPED_REASON
    if any(line.startswith("# gpu") and "pwr" in line for line in lines[:50]):
        return "nvidia-smi dmon output has no dates; record --query-gpu with tracehouse's sampler instead"
    return f"not a power log tracehouse can read ({EXPECTED})"


def read_text(path: Path) -> str:
    """The file's text (gunzipped when it is gzip), or PowerLogError."""
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return data.decode("utf-8")
    except OSError as exc:
        raise PowerLogError(path, f"cannot read power log: {exc.strerror or exc}") from exc
    except (EOFError, zlib.error) as exc:
        raise PowerLogError(path, f"truncated or corrupt gzip: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise PowerLogError(path, f"not a text power log (byte {exc.start} is not UTF-8)") from exc
