"""The peak FLOP/s table behind MFU."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tracehouse.pipeline.common.hardware import PEAK_FLOPS, peak_flops, table_rows


@pytest.mark.parametrize(
    ("device", "dtype", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989.4e12),
        ("NVIDIA H100 PCIe", "bf16", 756e12),  # the PCIe part must not match the SXM row
        ("NVIDIA H200", "bf16", 989.4e12),
        ("NVIDIA A100-SXM4-80GB", "bf16", 312e12),
        ("NVIDIA A100-SXM4-80GB", "fp32", 19.5e12),
        ("Tesla V100-SXM2-32GB", "fp16", 125e12),
        ("NVIDIA B200", "bf16", 2250e12),
        ("AMD Instinct MI300X", "bf16", 1307.4e12),
    ],
)
def test_known_devices(device: str, dtype: str, peak: float) -> None:
    assert peak_flops(device, dtype) == peak


def test_unknown_is_none_never_a_guess() -> None:
    assert peak_flops("Intel(R) Xeon(R) Processor", "fp32") is None
    assert peak_flops("Tesla V100-SXM2-32GB", "bf16") is None  # V100 has no bf16 tensor cores
    assert peak_flops(None, "bf16") is None
    assert peak_flops("NVIDIA H100", None) is None


def test_table_covers_the_required_devices() -> None:
    assert {"V100", "A100", "H100", "H200", "B200", "MI300X"} <= set(PEAK_FLOPS)
    assert len(table_rows()) == sum(len(v) for v in PEAK_FLOPS.values())


def test_module_does_not_import_torch() -> None:
    code = (
        "import sys, tracehouse.pipeline.common.hardware, tracehouse.collectors.spec; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_nvl_parts_are_not_given_the_sxm_peak():
    from tracehouse.pipeline.common.hardware import peak_flops

    assert peak_flops("NVIDIA H100 NVL", "bf16") == 835.5e12
    assert peak_flops("NVIDIA H100 80GB HBM3", "bf16") == 989.4e12
