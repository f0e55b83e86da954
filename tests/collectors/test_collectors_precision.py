"""Training precision per device: CPU runs stay fp32 (the sample traces' numbers), FSDP2 gets no
mixed-precision policy there; the GPU dtype is `hardware.training_dtype`'s (tested with it)."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy
from tracehouse.collectors.parallel import AUTOCAST_DTYPES, compute_dtype, device_autocast, fsdp_policy
from tracehouse.pipeline.common.hardware import training_dtype


def test_cpu_trains_in_fp32_with_no_fsdp_policy() -> None:
    cpu = torch.device("cpu")
    assert compute_dtype(cpu) is None
    assert fsdp_policy(cpu) == MixedPrecisionPolicy()
    with device_autocast(cpu):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


@pytest.mark.parametrize(
    ("device_type", "capability", "dtype"),
    [
        ("cuda", (7, 0), torch.float16),  # V100: no bf16 tensor cores
        ("cuda", (7, 5), torch.float16),  # Turing
        ("cuda", (8, 0), torch.bfloat16),  # A100
        ("cuda", (9, 0), torch.bfloat16),  # H100
        ("cuda", (10, 0), torch.bfloat16),  # B200
        ("rocm", (9, 4), torch.bfloat16),
    ],
)
def test_autocast_and_fsdp_take_the_devices_training_dtype(device_type, capability, dtype) -> None:
    assert AUTOCAST_DTYPES[training_dtype(device_type, capability)] == dtype
