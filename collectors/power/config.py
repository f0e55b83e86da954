"""Settings shared by every power sampler."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(kw_only=True)
class SamplerConfig:
    """Where a sampler writes and how often it reads the GPUs."""

    out_dir: Path  # the log is written here (created when missing)
    interval_ms: int = 100  # time between two reads of every GPU
    host: str = field(default_factory=socket.gethostname)  # written into the log and its name
    probe_timeout_s: float = 10.0  # how long a subprocess source may take to print its first sample
    dcgmi_profiling: bool = False  # also ask dcgmi for 1002/1004/1005 (needs DCGM's profiling module)

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        if self.interval_ms < 1:
            raise ValueError(f"interval_ms must be at least 1, got {self.interval_ms}")
        if self.probe_timeout_s <= 0:
            raise ValueError(f"probe_timeout_s must be positive, got {self.probe_timeout_s}")
        if not self.host or any(ch.isspace() or ch == "=" for ch in self.host):
            raise ValueError(f"host {self.host!r} must be non-empty, without spaces or '='")

    def log_path(self, source: str, suffix: str) -> Path:
        """The log file of one source; the host name keeps hosts apart on a shared folder."""
        return self.out_dir / f"power-{self.host}-{source}.{suffix}"
