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


def test_gb200_is_its_own_part_not_b200() -> None:
    # torch.cuda.get_device_name on a GB200 NVL72 node; "B200" is a substring of it.
    from tracehouse.pipeline.common.hardware import device_key

    assert device_key("NVIDIA GB200") == "GB200"
    assert peak_flops("NVIDIA GB200", "bf16") == 2500e12  # NVL72 datasheet: 5 PFLOPS sparse, halved
    assert peak_flops("NVIDIA GB200", "tf32") == 1250e12
    assert peak_flops("NVIDIA B200", "bf16") == 2250e12


@pytest.mark.parametrize(
    ("device_type", "capability", "dtype"),
    [
        # (torch.cuda.get_device_name, torch.cuda.get_device_capability) as recorded on each part
        ("cuda", (7, 0), "fp16"),  # Tesla V100-SXM2-32GB: no bf16 tensor cores
        ("cuda", (7, 5), "fp16"),  # Tesla T4 / GeForce RTX 2080 Ti
        ("cuda", (8, 0), "bf16"),  # NVIDIA A100-SXM4-80GB
        ("cuda", (9, 0), "bf16"),  # NVIDIA H100 80GB HBM3
        ("cuda", (10, 0), "bf16"),  # NVIDIA B200, NVIDIA GB200
        ("rocm", None, "bf16"),  # AMD Instinct MI300X
        ("cpu", None, "fp32"),
    ],
)
def test_training_dtype_follows_the_device(device_type: str, capability, dtype: str) -> None:
    from tracehouse.pipeline.common.hardware import training_dtype

    assert training_dtype(device_type, capability) == dtype


def test_a_v100_run_has_a_peak_for_its_dtype() -> None:
    from tracehouse.pipeline.common.hardware import training_dtype

    assert peak_flops("Tesla V100-SXM2-32GB", training_dtype("cuda", (7, 0))) == 125e12


def test_the_collectors_take_the_dtype_from_the_one_function() -> None:
    from pathlib import Path

    collectors = Path(__file__).resolve().parents[2] / "collectors"
    assert "training_dtype(device_type" in (collectors / "run_manifest.py").read_text()
    parallel = (collectors / "parallel.py").read_text()
    assert "training_dtype(" in parallel and "dtype=torch.bfloat16, enabled=device.type" not in parallel


@pytest.mark.parametrize(
    ("device", "bandwidth"),
    [
        ("NVIDIA H100 80GB HBM3", 3.35e12),
        ("NVIDIA H100 PCIe", 2.0e12),  # the PCIe part's HBM2e, not the SXM part's HBM3
        ("NVIDIA H200", 4.8e12),
        ("NVIDIA A100-SXM4-80GB", 2.039e12),
        ("AMD Instinct MI300X", 5.3e12),
        ("Intel(R) Xeon(R) Processor", None),
    ],
)
def test_peak_bandwidth(device: str, bandwidth: float | None) -> None:
    from tracehouse.pipeline.common.hardware import peak_bytes_per_s

    assert peak_bytes_per_s(device) == bandwidth


def test_every_peak_device_has_a_bandwidth() -> None:
    from tracehouse.pipeline.common.hardware import PEAK_BYTES_PER_S

    assert set(PEAK_BYTES_PER_S) == set(PEAK_FLOPS)


def test_roofline_bound_is_the_lower_of_peak_and_intensity_times_bandwidth() -> None:
    from tracehouse.pipeline.common.hardware import roofline_flops

    # H100 SXM bf16: the ridge point is 989.4e12 / 3.35e12 = 295.3 FLOP/byte
    assert roofline_flops(989.4e12, 3.35e12, 10.0) == 33.5e12  # memory-bound
    assert roofline_flops(989.4e12, 3.35e12, 1000.0) == 989.4e12  # compute-bound
    assert roofline_flops(989.4e12, 3.35e12, None) == 989.4e12  # bytes unknown: the peak
    assert roofline_flops(None, 3.35e12, 10.0) is None
    assert roofline_flops(989.4e12, None, 10.0) is None


def test_device_peaks_gains_bandwidth_in_an_old_warehouse() -> None:
    import duckdb
    from tracehouse.pipeline.warehouse.sql_runner import create_relations, load_sql_files

    con = duckdb.connect()
    # the table as a warehouse made before the bandwidth column holds it
    con.execute(
        "CREATE TABLE device_peaks (match_order INTEGER NOT NULL, device_key VARCHAR NOT NULL, "
        "dtype VARCHAR NOT NULL, peak_flops DOUBLE NOT NULL, PRIMARY KEY (device_key, dtype))"
    )
    create_relations(con, [f for f in load_sql_files() if f.name == "device_peaks"])
    got = con.execute(
        "SELECT peak_bytes_per_s FROM device_peaks WHERE device_key = 'H100' AND dtype = 'bf16'"
    )
    assert got.fetchall() == [(3.35e12,)]
