"""`dcgmi dmon` as a stamped subprocess: power, energy counter, temperature, utilisation, memory."""

from __future__ import annotations

import re

from tracehouse.collectors.power.config import SamplerConfig
from tracehouse.collectors.power.nvml import visible_fact
from tracehouse.collectors.power.stamped_process import StampedProcessSampler
from tracehouse.pipeline.common.power_log import DCGMI_CLOCK, format_log_header

# 155 power W, 156 total energy mJ (counter), 150 temperature C, 203 GPU util %, 252 FB used MiB.
FIELDS = (155, 156, 150, 203, 252)
# SM active, tensor active, DRAM active: only when DCGM's profiling module is loaded.
PROFILING_FIELDS = (1002, 1004, 1005)
DATA_ROW = re.compile(r"^\s*(GPU|GPU-I|GPU-CI|Switch|CPU|Core|Link)\s+\d+\s+\S")


def dmon_command(config: SamplerConfig) -> list[str]:
    """The dcgmi command line for this configuration."""
    fields = FIELDS + (PROFILING_FIELDS if config.dcgmi_profiling else ())
    return ["dcgmi", "dmon", "-e", ",".join(map(str, fields)), "-d", str(config.interval_ms)]


def is_dmon_sample(line: str) -> bool:
    """True for a data row such as `GPU 0   250.3 ...` (an entity label, then values)."""
    return DATA_ROW.match(line) is not None


class DcgmiSampler(StampedProcessSampler):
    """Writes `power-<host>-dcgmi.log`; needs a running nv-hostengine."""

    source = "dcgmi"
    install_hint = ": install NVIDIA DCGM (datacenter-gpu-manager) and start nv-hostengine"

    def __init__(self, config: SamplerConfig) -> None:
        header = format_log_header(
            source=self.source,
            host=config.host,
            interval_ms=config.interval_ms,
            clock=DCGMI_CLOCK,
            **visible_fact(),
        )
        super().__init__(
            command=dmon_command(config),
            path=config.log_path(self.source, "log"),
            header=header,
            is_sample=is_dmon_sample,
            probe_timeout_s=config.probe_timeout_s,
        )
