"""Every real power log in ../shared/data parses, with values checked against the files by hand."""

from __future__ import annotations

import time

import polars as pl
import pytest
from support.testdata import shared_path
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.parsers.power.parse import parse_power_log
from tracehouse.pipeline.warehouse.schema import POWER_SAMPLES

NS = 1_000_000_000
QUERY_GPU = "power/nvidia-smi/linux-x86_64__nvidia-{}__load__query-gpu.csv"


@pytest.fixture
def utc_zone(monkeypatch: pytest.MonkeyPatch):
    """Run with the local zone set to UTC (third-party nvidia-smi files are read in the local zone)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def one_row(frame: pl.DataFrame) -> dict:
    assert frame.height == 1
    return frame.row(0, named=True)


def test_h100_query_gpu_csv(utc_zone) -> None:
    frame = parse_power_log(shared_path(QUERY_GPU.format("h100-80gb-hbm3")))
    assert frame.schema == pl.Schema(POWER_SAMPLES)
    # "2026/07/14 08:12:53.353" read as UTC: `date -u -d '2026-07-14 08:12:53' +%s` = 1784016773
    assert one_row(frame) == {
        "host": None,
        "device": 0,
        "ts_unix_ns": 1784016773 * NS + 353_000_000,
        "power_w": 631.95,
        "energy_counter_j": None,
        "temperature_c": 59.0,
        "gpu_util_pct": 100.0,
        "mem_used_mib": 19818.0,
        "source": "nvidia-smi",
        "clock": "nvidia-smi-localtime-assumed-UTC",
    }


def test_h200_and_windows_query_gpu_csv(utc_zone) -> None:
    h200 = one_row(parse_power_log(shared_path(QUERY_GPU.format("h200"))))
    assert (h200["ts_unix_ns"], h200["power_w"], h200["mem_used_mib"]) == (
        1783116669 * NS + 763_000_000,
        627.4,
        32362.0,
    )
    windows = shared_path(
        "power/nvidia-smi/windows-x86_64__nvidia-geforce-rtx-2080-super__591.86__load__query-gpu.csv"
    )
    rtx = one_row(parse_power_log(windows))
    assert (rtx["power_w"], rtx["temperature_c"], rtx["gpu_util_pct"]) == (97.43, 45.0, 7.0)


def test_mig_row_has_null_utilisation(utc_zone) -> None:
    """MIG mode: utilization.gpu is `[N/A]` on the parent GPU row; power is still there."""
    row = one_row(parse_power_log(shared_path(QUERY_GPU.format("h100-mig"))))
    assert (row["power_w"], row["gpu_util_pct"], row["mem_used_mib"]) == (433.78, None, 11125.0)


def test_local_timestamps_follow_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    try:
        row = one_row(parse_power_log(shared_path(QUERY_GPU.format("h100-80gb-hbm3"))))
    finally:
        monkeypatch.undo()
        time.tzset()
    # `TZ=Asia/Shanghai date -d '2026-07-14 08:12:53' +%s` = 1783987973
    assert row["ts_unix_ns"] == 1783987973 * NS + 353_000_000
    assert row["clock"] == "nvidia-smi-localtime-assumed-CST"


def test_capture_bundles_give_idle_and_load_samples(utc_zone) -> None:
    frame = parse_power_log(shared_path("power/nvidia-smi/h100_capture.txt"))
    assert frame.select("ts_unix_ns", "power_w", "temperature_c", "gpu_util_pct").rows() == [
        (1784016758 * NS + 696_000_000, 69.85, 41.0, 0.0),  # idle :: query-gpu, 08:12:38.696
        (1784016773 * NS + 353_000_000, 631.95, 59.0, 100.0),  # load :: query-gpu, 08:12:53.353
    ]
    assert parse_power_log(shared_path("power/nvidia-smi/h200_capture.txt"))["power_w"].to_list() == [
        77.71,
        627.4,
    ]
    assert parse_power_log(shared_path("power/nvidia-smi/h100_mig_capture.txt"))["power_w"].to_list() == [
        71.15,
        433.78,
    ]


def test_wrapper_series_with_iso_timestamps() -> None:
    frame = parse_power_log(shared_path("power/nvidia-smi/wrapper_8gpu_power_log.csv"))
    assert frame.height == 43  # 5 full sweeps of 8 GPUs, then GPUs 0-2 of a sixth
    assert frame["device"].unique().sort().to_list() == list(range(8))  # from `gpu`, not the constant `index`
    assert set(frame["clock"]) == {"iso8601"}
    first = frame.row(0, named=True)
    # 2025-09-08T17:26:50+08:00 = `date -u -d '2025-09-08 17:26:50 +0800' +%s` = 1757323610
    assert (first["ts_unix_ns"], first["power_w"], first["temperature_c"], first["mem_used_mib"]) == (
        1757323610 * NS,
        74.01,
        33.0,
        4.0,
    )
    last_gpu2 = frame.filter(pl.col("device") == 2).row(-1, named=True)
    assert (last_gpu2["ts_unix_ns"], last_gpu2["power_w"]) == ((1757323610 + 8) * NS, 72.96)
    assert frame["gpu_util_pct"].null_count() == 43  # the wrapper did not log utilisation


def test_dcgm_exporter_prometheus_text() -> None:
    path = shared_path("power/dcgm-exporter/a100_mig_metrics.prom")
    row = one_row(parse_power_log(path, host="fallback"))
    assert row == {
        "host": "ub20-a100-k8s",  # the Hostname label wins over the fallback
        "device": 0,
        "ts_unix_ns": path.stat().st_mtime_ns,
        "power_w": 409.692,
        "energy_counter_j": 319159.391,  # 319159391 mJ
        "temperature_c": 61.0,
        "gpu_util_pct": None,
        "mem_used_mib": 4845.0,
        "source": "dcgm-exporter",
        "clock": "file-mtime",
    }


@pytest.mark.parametrize(
    ("relative", "reason"),
    [
        ("power/nvidia-smi/h100_load_nvidia-smi-dmon.txt", "nvidia-smi dmon output has no dates"),
        ("power/dcgm/dmon_header_layout_dcgm46.txt", "dcgmi dmon prints no timestamps"),
        ("power/dcgm/dcgm_fields_table.csv", "not a power log tracehouse can read"),
        ("power/dcgm-exporter/default-counters.csv", "not a power log tracehouse can read"),
    ],
)
def test_real_files_that_are_not_power_logs_are_refused(relative: str, reason: str) -> None:
    path = shared_path(relative)
    with pytest.raises(PowerLogError, match=reason) as caught:
        parse_power_log(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert "\n" not in str(caught.value)
