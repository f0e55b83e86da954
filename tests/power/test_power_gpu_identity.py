"""CUDA ordinal -> physical GPU through CUDA_VISIBLE_DEVICES (issue 30 item 11): pure functions
over recorded nvidia-smi / NVML identities, and ingest of logs whose GPUs are not the run's."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.testdata import shared_path
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.common.gpu_identity import PhysicalGpu, cuda_ordinals, visible_gpus
from tracehouse.pipeline.common.power_log import NVML_HEADER, NVML_IDENTITY_HEADER, format_log_header
from tracehouse.pipeline.parsers.power.parse import parse_power_log

H100_CAPTURE = "power/nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__load__query-gpu.csv"
# An 8-GPU node as nvidia-smi and NVML name it: UUIDs and bus ids in their printed forms.
NODE = [
    PhysicalGpu(
        index=i, uuid=f"GPU-{i}a{i}c55a1-0b2e-7c3d-9f10-00000000000{i}", pci_bus_id=f"00000000:{bus}:00.0"
    )
    for i, bus in enumerate(["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"])
]


@pytest.mark.parametrize(
    ("variable", "physical"),
    [
        (None, [0, 1, 2, 3, 4, 5, 6, 7]),  # unset: every GPU, NVML (PCI) order
        ("4,5,6,7", [4, 5, 6, 7]),
        ("6, 4", [6, 4]),  # the order given is the ordinal order
        ("GPU-5a5,GPU-7a7c55a1-0b2e-7c3d-9f10-000000000007", [5, 7]),  # unique UUID prefixes
        ("4,9,5", [4]),  # CUDA stops at the first entry it cannot resolve
        ("4,-1,5", [4]),
        ("GPU-,4", []),  # a prefix every GPU shares is ambiguous
        ("MIG-0a1b,4", []),  # MIG instances are not whole GPUs
        ("4,4", [4]),
        ("", []),
    ],
)
def test_visible_gpus_follow_cuda_visible_devices(variable: str | None, physical: list[int]) -> None:
    assert [gpu.index for gpu in visible_gpus(variable, NODE)] == physical
    assert cuda_ordinals(variable, NODE) == {index: ordinal for ordinal, index in enumerate(physical)}


def smi_log(visible: str | None, rows: list[str]) -> str:
    facts = {"cuda_visible_devices": visible} if visible is not None else {}
    header = format_log_header(
        source="nvidia-smi", host="n1", interval_ms=100, clock="nvidia-smi-localtime", utc_offset_s=0, **facts
    )
    columns = (
        "timestamp, index, uuid, pci.bus_id, power.draw [W], temperature.gpu, utilization.gpu [%], "
        "memory.used [MiB]"
    )
    return header + "".join(f"{1_000 + n}\t{line}\n" for n, line in enumerate([columns, *rows]))


def node_rows() -> list[str]:
    """One sample per GPU; GPU i draws 100 + i W."""
    return [
        f"2026/07/14 08:12:53.353, {g.index}, {g.uuid}, {g.pci_bus_id}, {100 + g.index}.00 W, 40, 90 %, "
        "1000 MiB"
        for g in NODE
    ]


@pytest.mark.parametrize("visible", ["4,5,6,7", "GPU-4a4,GPU-5a5,GPU-6a6,GPU-7a7"])
def test_nvidia_smi_log_keeps_the_runs_gpus_under_their_cuda_ordinals(tmp_path: Path, visible: str) -> None:
    log = tmp_path / "power-n1-nvidia-smi.csv"
    log.write_text(smi_log(visible, node_rows()))
    frame = parse_power_log(log).sort("device")
    # cuda:0 is GPU 4 (104 W), not GPU 0 (100 W), another job's.
    assert frame["device"].to_list() == [0, 1, 2, 3]
    assert frame["power_w"].to_list() == [104.0, 105.0, 106.0, 107.0]


def test_nvidia_smi_log_without_the_variable_keeps_nvidia_smi_indices(tmp_path: Path) -> None:
    log = tmp_path / "power-n1-nvidia-smi.csv"
    log.write_text(smi_log(None, node_rows()))
    assert parse_power_log(log).sort("device")["power_w"].to_list() == [100.0 + i for i in range(8)]


def test_a_recorded_h100_row_maps_through_its_index_and_its_uuid(tmp_path: Path) -> None:
    """The real capture's identity columns (uuid GPU-0000..., pci.bus_id 00000000:00:09.0)."""
    text = shared_path(H100_CAPTURE).read_text().splitlines()
    names = [name.strip() for name in text[0].split(",")]
    cells = [cell.strip() for cell in text[1].split(",")]
    uuid, bus = cells[names.index("uuid")], cells[names.index("pci.bus_id")]
    gpu = PhysicalGpu(index=0, uuid=uuid, pci_bus_id=bus)
    assert (uuid, bus) == ("GPU-00000000-0000-0000-0000-000000000000", "00000000:00:09.0")
    assert cuda_ordinals(uuid, [gpu]) == cuda_ordinals("0", [gpu]) == {0: 0}
    assert cuda_ordinals("1", [gpu]) == {}


def test_no_logged_gpu_of_the_run_is_one_line(tmp_path: Path) -> None:
    log = tmp_path / "power-n1-nvidia-smi.csv"
    log.write_text(smi_log("9", node_rows()))
    with pytest.raises(PowerLogError, match="no logged GPU is one of cuda_visible_devices='9'"):
        parse_power_log(log)


def test_nvml_log_reads_identity_columns_and_legacy_logs(tmp_path: Path) -> None:
    head = format_log_header(source="nvml", host="n1", interval_ms=100, clock="host-realtime")
    new = tmp_path / "new.csv"
    new.write_text(
        head + NVML_IDENTITY_HEADER + "\n5,0,250000,1000,40,90,1048576,GPU-4a4c55a1,00000000:9A:00.0\n"
    )
    legacy = tmp_path / "legacy.csv"
    legacy.write_text(head + NVML_HEADER + "\n5,0,250000,1000,40,90,1048576\n")
    for path in (new, legacy):
        row = parse_power_log(path).row(0, named=True)
        assert (row["device"], row["power_w"], row["energy_counter_j"]) == (0, 250.0, 1.0)


def test_dcgmi_log_maps_gpu_ids_through_an_index_list(tmp_path: Path) -> None:
    """DCGM GPU ids are NVML indices; a UUID list cannot be mapped without UUIDs in the log."""
    header = "#Entity         POWER             "
    rows = "".join(f"{2000 + i}\tGPU {i}".ljust(21) + f" {100 + i}.000\n" for i in range(8))
    for visible, expected in (
        ("6,7", [(0, 106.0), (1, 107.0)]),
        ("GPU-6a6", [(i, 100.0 + i) for i in range(8)]),
    ):
        head = format_log_header(
            source="dcgmi",
            host="n1",
            interval_ms=100,
            clock="host-realtime-at-read",
            cuda_visible_devices=visible,
        )
        log = tmp_path / "power-n1-dcgmi.log"
        log.write_text(f"{head}1000\t{header}\n{rows}")
        assert parse_power_log(log).sort("device").select("device", "power_w").rows() == expected
