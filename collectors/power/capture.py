"""`capture_power`: sample GPU power beside a training run with the first source that works here."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

from tracehouse.collectors.power.config import SamplerConfig
from tracehouse.collectors.power.dcgmi import DcgmiSampler
from tracehouse.collectors.power.errors import PowerSourceError
from tracehouse.collectors.power.nvidia_smi import NvidiaSmiSampler
from tracehouse.collectors.power.nvml import NvmlSampler
from tracehouse.pipeline.common.manifest import PowerCapture

log = logging.getLogger(__name__)


class PowerSampler(Protocol):
    """What every source offers: `start` (raises PowerSourceError when unusable) and `stop`;
    `error` is set when sampling stopped before `stop` (NVML failed, the tool exited)."""

    source: str
    error: PowerSourceError | None

    def start(self) -> list[str]: ...

    def stop(self) -> None: ...


SAMPLERS: dict[str, type] = {"nvml": NvmlSampler, "dcgmi": DcgmiSampler, "nvidia-smi": NvidiaSmiSampler}
AUTO_ORDER = ("nvml", "dcgmi", "nvidia-smi")  # the hardware energy counter first (NVML, DCGM 156)


def make_sampler(source: str, config: SamplerConfig) -> PowerSampler:
    """A sampler for one named source (constructing it opens nothing)."""
    if source not in SAMPLERS:
        raise ValueError(f"unknown power source {source!r}; choose auto or one of {', '.join(SAMPLERS)}")
    return SAMPLERS[source](config)


@contextmanager
def capture_power(
    out_dir: Path, *, source: str = "auto", interval_ms: int = 100, config: SamplerConfig | None = None
) -> Iterator[PowerCapture]:
    """Sample power into out_dir while the block runs; yield how (or why not) it was captured.

    When no source works the block still runs and the PowerCapture says why, per source; when
    the source stops mid-run, the PowerCapture's `failure` says so once the block has ended.
    """
    config = config or SamplerConfig(out_dir=Path(out_dir), interval_ms=interval_ms)
    sources = AUTO_ORDER if source == "auto" else (source,)
    samplers = [make_sampler(name, config) for name in sources]  # validates names before the run
    reasons = []
    for sampler in samplers:
        try:
            files = sampler.start()
        except PowerSourceError as exc:
            reasons.append(f"{sampler.source}: {exc}")
            continue
        capture = PowerCapture(source=sampler.source, files=files, interval_ms=config.interval_ms)
        try:
            yield capture
        finally:
            sampler.stop()
            if sampler.error is not None:  # the manifest, written after the block, records it
                capture.failure = f"{sampler.source} sampling stopped early: {sampler.error}"
        return
    reason = " | ".join(reasons)
    log.warning("no GPU power capture: %s", reason)
    yield PowerCapture(unavailable_reason=reason)
