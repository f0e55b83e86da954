"""capture_power on this machine (real probing), and the subprocess samplers against replaying stand-ins."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest
from support.fake_tools import install_fake_tool
from support.testdata import shared_path
from tracehouse.collectors.power import PowerSourceError, SamplerConfig, capture_power
from tracehouse.collectors.power.nvml import NvmlSampler
from tracehouse.pipeline.parsers.power.parse import parse_power_log

NS = 1_000_000_000
QUERY_GPU = "power/nvidia-smi/linux-x86_64__nvidia-h100-80gb-hbm3__load__query-gpu.csv"
DMON_LAYOUT = "power/dcgm/dmon_header_layout_dcgm46.txt"


@pytest.fixture
def fake_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """install_fake_tool bound to this test's folder and environment."""
    return functools.partial(install_fake_tool, tmp_path, monkeypatch)


def no_gpu_tools_here() -> bool:
    import shutil

    return shutil.which("nvidia-smi") is None and shutil.which("dcgmi") is None


@pytest.mark.skipif(not no_gpu_tools_here(), reason="this test is about a machine without GPU tools")
def test_no_source_on_this_machine_leaves_the_run_alone(tmp_path: Path) -> None:
    out = tmp_path / "run"
    ran = False
    with capture_power(out) as capture:
        ran = True
    assert ran and capture.source is None and capture.files == [] and capture.interval_ms is None
    reasons = capture.unavailable_reason.split(" | ")
    assert [r.split(":")[0] for r in reasons] == ["nvml", "dcgmi", "nvidia-smi"]
    assert "NVMLError_LibraryNotFound" in reasons[0] and "run on a GPU node" in reasons[0]
    assert "dcgmi is not on PATH" in reasons[1] and "nvidia-smi is not on PATH" in reasons[2]
    assert not out.exists()  # it did nothing else


def test_nvml_error_is_translated_with_a_fix(tmp_path: Path) -> None:
    sampler = NvmlSampler(SamplerConfig(out_dir=tmp_path / "x"))  # constructing opens nothing
    assert not (tmp_path / "x").exists()
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("NVML works on this machine")
    except pynvml.NVMLError:
        pass
    with pytest.raises(PowerSourceError, match=r"NVML init failed \(NVMLError_"):
        sampler.start()
    assert not (tmp_path / "x").exists()


def test_unknown_source_is_refused_before_the_run(tmp_path: Path) -> None:
    with (
        pytest.raises(ValueError, match="unknown power source 'rapl'"),
        capture_power(tmp_path, source="rapl"),
    ):
        pass


def test_nvidia_smi_sampler_replaying_a_real_capture(tmp_path: Path, fake_tool, monkeypatch) -> None:
    real = shared_path(QUERY_GPU).read_text().splitlines()
    argv = fake_tool("nvidia-smi", real)
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30: the sampler must record it
    time.tzset()
    try:
        config = SamplerConfig(out_dir=tmp_path / "out", interval_ms=250, host="node3")
        with capture_power(tmp_path / "out", source="nvidia-smi", config=config) as capture:
            pass
    finally:
        monkeypatch.undo()
        time.tzset()
    assert (capture.source, capture.files, capture.interval_ms) == (
        "nvidia-smi",
        ["power-node3-nvidia-smi.csv"],
        250,
    )
    assert argv.read_text().split() == [
        "--query-gpu=timestamp,index,uuid,pci.bus_id,power.draw,temperature.gpu,utilization.gpu,memory.used",
        "--format=csv",
        "-lms",
        "250",
    ]
    row = parse_power_log(tmp_path / "out" / capture.files[0]).row(0, named=True)
    # 2026/07/14 08:12:53.353 at +05:30: `date -u -d '2026-07-14 08:12:53 +0530' +%s` = 1783996973
    assert (row["host"], row["ts_unix_ns"], row["power_w"], row["clock"]) == (
        "node3",
        1783996973 * NS + 353_000_000,
        631.95,
        "nvidia-smi-localtime",
    )


def dmon_lines() -> list[str]:
    """The real DCGM 4.6 header for -e 155,156,150,203,252, then rows at its column offsets."""
    layout = shared_path(DMON_LAYOUT).read_text().splitlines()
    start = layout.index("$ dcgmi dmon -e 155,156,150,203,252")
    header, units = layout[start + 1], layout[start + 2]
    rows = [
        f"GPU {gpu}".ljust(16) + f"{w:<18}{mj:<24}{'44':<13}{'97':<18}{'40000':<18}"
        for w, mj, gpu in [("300.5", "1000000", 0), ("301.5", "1030100", 0), ("N/A", "N/A", 1)]
    ]
    return [header, units, rows[0], rows[2], rows[1]]


def test_dcgmi_sampler_stamps_each_line_as_read(tmp_path: Path, fake_tool) -> None:
    argv = fake_tool("dcgmi", dmon_lines(), pause=0.05)
    before = time.time_ns()
    with capture_power(tmp_path, source="dcgmi", config=SamplerConfig(out_dir=tmp_path, host="h")) as capture:
        log = tmp_path / "power-h-dcgmi.log"
        deadline = time.monotonic() + 30
        while log.read_text().count("\tGPU ") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert capture.source == "dcgmi" and argv.read_text() == "dmon -e 155,156,150,203,252 -d 100"
    frame = parse_power_log(log)
    gpu0 = frame.filter(frame["device"] == 0)
    assert gpu0["power_w"].to_list() == [300.5, 301.5] and gpu0["energy_counter_j"].to_list() == [
        1000.0,
        1030.1,
    ]
    stamps = gpu0["ts_unix_ns"].to_list()
    assert before < stamps[0] < stamps[1]  # lines arrive one by one through the pseudo-terminal
    assert frame.filter(frame["device"] == 1)["power_w"].to_list() == [None]


def test_dcgmi_error_falls_through_to_the_next_source(tmp_path: Path, fake_tool) -> None:
    """Real output from DCGM issue #3: header, then an error, exit. auto must move on to nvidia-smi."""
    fake_tool(
        "dcgmi",
        [
            "# Entity  TENSO",
            "      Id",
            "Error setting watches. Result: The third-party Profiling module returned an unrecoverable error",
        ],
        exit_code=255,
    )
    fake_tool("nvidia-smi", shared_path(QUERY_GPU).read_text().splitlines())
    config = SamplerConfig(out_dir=tmp_path, host="h")
    with capture_power(tmp_path, config=config) as capture:
        pass
    assert capture.source == "nvidia-smi"
    assert sorted(p.name for p in tmp_path.glob("power-*")) == [
        "power-h-nvidia-smi.csv"
    ]  # no dcgmi leftovers


def test_dcgmi_error_is_the_reason_when_nothing_else_works(tmp_path: Path, fake_tool) -> None:
    fake_tool(
        "dcgmi",
        ["# Entity  POWER", "      Id", "Error: unable to establish a connection to the host engine"],
        exit_code=255,
    )
    with capture_power(tmp_path, source="dcgmi", config=SamplerConfig(out_dir=tmp_path, host="h")) as capture:
        pass
    assert capture.source is None
    assert capture.unavailable_reason == (
        "dcgmi: `dcgmi dmon -e 155,156,150,203,252 -d 100` exited with status 255; "
        "it said: Error: unable to establish a connection to the host engine"
    )
