"""`nvidia-smi --query-gpu ... -lms N` as a stamped subprocess; its local-time stamps get the UTC offset."""

from __future__ import annotations

import re
import time

from tracehouse.collectors.power.config import SamplerConfig
from tracehouse.collectors.power.nvml import visible_fact
from tracehouse.collectors.power.stamped_process import StampedProcessSampler
from tracehouse.pipeline.common.power_log import format_log_header

# uuid and pci.bus_id say which physical GPU each index is (mapped to CUDA ordinals at ingest).
QUERY = "timestamp,index,uuid,pci.bus_id,power.draw,temperature.gpu,utilization.gpu,memory.used"
SAMPLE_ROW = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d")  # a row starts with its timestamp


def query_command(config: SamplerConfig) -> list[str]:
    """The nvidia-smi command line for this configuration."""
    return ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv", "-lms", str(config.interval_ms)]


def is_query_sample(line: str) -> bool:
    """True for a data row (it begins with nvidia-smi's timestamp)."""
    return SAMPLE_ROW.match(line) is not None


class NvidiaSmiSampler(StampedProcessSampler):
    """Writes `power-<host>-nvidia-smi.csv`; records this host's UTC offset for nvidia-smi's local time."""

    source = "nvidia-smi"
    install_hint = ": install the NVIDIA driver utilities"

    def __init__(self, config: SamplerConfig) -> None:
        # nvidia-smi inherits this process's zone (TZ), so this offset is the one its stamps use.
        header = format_log_header(
            source=self.source,
            host=config.host,
            interval_ms=config.interval_ms,
            clock="nvidia-smi-localtime",
            utc_offset_s=time.localtime().tm_gmtoff,
            **visible_fact(),
        )
        super().__init__(
            command=query_command(config),
            path=config.log_path(self.source, "csv"),
            header=header,
            is_sample=is_query_sample,
            probe_timeout_s=config.probe_timeout_s,
        )
