"""The power samplers' errors, and the ONE place where vendor (NVML) errors are translated."""

from __future__ import annotations

from tracehouse.pipeline.common.errors import TracehouseError

# NVML error class name -> what the user can do about it.
NVML_FIXES: dict[str, str] = {
    "NVMLError_LibraryNotFound": "libnvidia-ml.so is missing: run on a GPU node with the NVIDIA driver",
    "NVMLError_DriverNotLoaded": "the NVIDIA kernel driver is not loaded: check `nvidia-smi`",
    "NVMLError_NoPermission": "no permission to query the GPU: run as a user that can open /dev/nvidia*",
    "NVMLError_LibRmVersionMismatch": "NVML and kernel driver versions differ: reload the driver or reboot",
    "NVMLError_GpuIsLost": "a GPU fell off the bus: check `dmesg` and reset the GPU",
    "NVMLError_NotSupported": "this GPU does not support the query: use source='dcgmi' or 'nvidia-smi'",
    "NVMLError_Uninitialized": "NVML was not initialised: a tracehouse bug, please report it",
    "NVMLError_InsufficientPower": "a GPU's external power cables are not connected properly",
}


class PowerSourceError(TracehouseError):
    """A power source that cannot be used on this machine; the message says how to fix it."""


def from_nvml_error(exc: Exception, doing: str) -> PowerSourceError:
    """Translate an `NVMLError_*` raised while `doing` into a PowerSourceError."""
    name = type(exc).__name__
    fix = NVML_FIXES.get(name, "see the NVML error above and `nvidia-smi -q`")
    return PowerSourceError(f"NVML {doing} failed ({name}: {exc}); {fix}")
