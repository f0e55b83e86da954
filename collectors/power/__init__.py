"""tracehouse.collectors.power: GPU power samplers (NVML, dcgmi dmon, nvidia-smi) behind `capture_power`."""

from tracehouse.collectors.power.capture import AUTO_ORDER, capture_power, make_sampler
from tracehouse.collectors.power.config import SamplerConfig
from tracehouse.collectors.power.errors import PowerSourceError

__all__ = ["AUTO_ORDER", "PowerSourceError", "SamplerConfig", "capture_power", "make_sampler"]
