"""Which physical GPU a CUDA ordinal is: NVML / nvidia-smi number GPUs by their own index, a CUDA
process by its position in `CUDA_VISIBLE_DEVICES`.

With `CUDA_VISIBLE_DEVICES=4,5,6,7` a rank's `cuda:0` (Kineto's `device` 0) is NVML GPU 4. The
variable holds indices or UUIDs (`GPU-8a3c...`, any unique prefix); CUDA reads it left to right
and stops at the first entry it cannot resolve (`-1`, a typo, a MIG id here), so the GPUs after
it are invisible. Indices mean NVML's order (PCI bus order) when `CUDA_DEVICE_ORDER=PCI_BUS_ID`,
which the launcher sets for the ranks (`collectors/launch.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

VISIBLE_FACT = "cuda_visible_devices"  # the power log header fact holding the variable's value


@dataclass(frozen=True, kw_only=True)
class PhysicalGpu:
    """One GPU as NVML or nvidia-smi names it."""

    index: int  # NVML index (nvidia-smi's `index`)
    uuid: str  # e.g. GPU-4b1c55a1-...
    pci_bus_id: str = ""  # e.g. 00000000:3B:00.0


def resolve_entry(entry: str, gpus: list[PhysicalGpu]) -> PhysicalGpu | None:
    """The GPU one CUDA_VISIBLE_DEVICES entry names, None when CUDA could not resolve it."""
    if entry.isdigit():
        return next((gpu for gpu in gpus if gpu.index == int(entry)), None)
    if entry.startswith("GPU-"):
        matches = [gpu for gpu in gpus if gpu.uuid.lower().startswith(entry.lower())]
        return matches[0] if len(matches) == 1 else None
    return None  # MIG-..., -1, anything else


def visible_gpus(cuda_visible_devices: str | None, gpus: Iterable[PhysicalGpu]) -> list[PhysicalGpu]:
    """The GPUs a CUDA process sees, in CUDA ordinal order (None: the variable is unset, all)."""
    by_index = sorted(gpus, key=lambda gpu: gpu.index)
    if cuda_visible_devices is None:
        return by_index
    seen: list[PhysicalGpu] = []
    for entry in cuda_visible_devices.split(","):
        gpu = resolve_entry(entry.strip(), by_index)
        if gpu is None or gpu in seen:
            break
        seen.append(gpu)
    return seen


def cuda_ordinals(cuda_visible_devices: str | None, gpus: Iterable[PhysicalGpu]) -> dict[int, int]:
    """NVML index -> CUDA ordinal of every GPU the process sees (the others are absent)."""
    return {gpu.index: ordinal for ordinal, gpu in enumerate(visible_gpus(cuda_visible_devices, gpus))}
