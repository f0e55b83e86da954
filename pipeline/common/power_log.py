"""The power-log format tracehouse's samplers write and its parsers read.

Every log starts with one header line, `# tracehouse power log: version=1 source=nvml host=...
interval_ms=100 clock=host-realtime`; an NVML log then has the `NVML_COLUMNS` as a CSV header,
in NVML's own integer units (lossless; the parser converts them once). Clocks name which clock
stamped a sample.
"""

from __future__ import annotations

from pathlib import Path

from tracehouse.pipeline.common.errors import PowerLogError

# First line of every log a tracehouse sampler writes; key=value facts follow the colon.
LOG_MAGIC = "# tracehouse power log:"
LOG_VERSION = 1

# The NVML sampler writes exactly these columns, in this order: name -> what it holds.
NVML_COLUMNS: dict[str, str] = {
    "ts_unix_ns": "host CLOCK_REALTIME when the device was read",
    "device": "CUDA ordinal under the run's CUDA_VISIBLE_DEVICES (the NVML index in legacy logs)",
    "power_mw": "nvmlDeviceGetPowerUsage",
    "energy_counter_mj": "nvmlDeviceGetTotalEnergyConsumption (since driver load)",
    "temperature_c": "nvmlDeviceGetTemperature(GPU)",
    "gpu_util_pct": "nvmlDeviceGetUtilizationRates().gpu",
    "mem_used_bytes": "nvmlDeviceGetMemoryInfo().used",
}
NVML_HEADER = ",".join(NVML_COLUMNS)
# The sampler appends which physical GPU each row's ordinal is (text); logs without them (written
# before) stay readable, their `device` is the NVML index.
NVML_IDENTITY_COLUMNS: dict[str, str] = {
    "uuid": "nvmlDeviceGetUUID",
    "pci_bus_id": "nvmlDeviceGetPciInfo().busId",
}
NVML_IDENTITY_HEADER = ",".join([*NVML_COLUMNS, *NVML_IDENTITY_COLUMNS])
NVML_CLOCK = "host-realtime"
DCGMI_CLOCK = "host-realtime-at-read"


def format_log_header(**facts: object) -> str:
    """The first line of a sampler's log, e.g. `# tracehouse power log: version=1 source=nvml`."""
    for key, value in facts.items():
        if any(ch.isspace() for ch in f"{key}{value}") or "=" in f"{key}{value}":
            raise ValueError(f"log header fact {key}={value!r} must not contain spaces or '='")
    body = " ".join(f"{key}={value}" for key, value in {"version": LOG_VERSION, **facts}.items())
    return f"{LOG_MAGIC} {body}\n"


def parse_log_header(path: Path, line: str) -> dict[str, str]:
    """The key=value facts of a tracehouse log header line."""
    facts: dict[str, str] = {}
    for token in line[len(LOG_MAGIC) :].split():
        key, sep, value = token.partition("=")
        if not sep:
            raise PowerLogError(path, f"malformed tracehouse log header token {token[:40]!r}")
        facts[key] = value
    if facts.get("version") != str(LOG_VERSION):
        raise PowerLogError(
            path, f"tracehouse power log version {str(facts.get('version'))[:40]!r} is not {LOG_VERSION}"
        )
    return facts
