"""Every power-log format holds its values to common.limits.POWER_RANGES.

A sample out of range (negative, NaN, inf, 1e308 W, before 1970) is dropped and counted; a time or
device index the warehouse cannot store (year 1, a 10^23 ns stamp) fails the file in one line.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.common.power_log import NVML_HEADER, format_log_header
from tracehouse.pipeline.parsers.power.parse import read_power_log

TS = 1_700_000_000_000_000_000
NVML = format_log_header(source="nvml", host="h", interval_ms=100, clock="host-realtime") + NVML_HEADER + "\n"
DMON = format_log_header(source="dcgmi", host="h", interval_ms=100, clock="host-realtime-at-read")
DMON += f"{TS}\t#Entity  POWER  TMPTR\n{TS}\tID  W  C\n"
SMI = "timestamp, index, power.draw [W]\n"


def nvml(power_mw: str, ts: int = TS) -> str:
    return f"{ts},0,{power_mw},1000,50,90,1024\n"


def dmon(power: str, ts: int = TS + 1) -> str:
    return f"{ts}\tGPU 0  {power}  40\n"


def smi(power: str, stamp: str = "2026/07/14 08:12:53.353") -> str:
    return f"{stamp}, 0, {power} W\n"


def prom(power: str, ms: int = 1_700_000_000_000) -> str:
    return f'DCGM_FI_DEV_POWER_USAGE{{gpu="0"}} {power} {ms}\n'


def read(tmp_path: Path, text: str):
    path = tmp_path / "p.log"
    path.write_text(text)
    return read_power_log(path)


GOOD = {"nvml": nvml("250000"), "dmon": dmon("250.5"), "smi": smi("250.5"), "prom": prom("250.5", 1)}
HEAD = {"nvml": NVML, "dmon": DMON, "smi": SMI, "prom": ""}
BAD = {
    "nvml": [nvml("-1"), nvml("250000", ts=-5)],
    "dmon": [dmon("-1"), dmon("nan"), dmon("inf"), dmon("-inf"), dmon("1e308")],
    "smi": [
        smi("-1"),
        smi("nan"),
        smi("inf"),
        smi("-inf"),
        smi("1e308"),
        smi("1", "1960/01/01 00:00:00.000"),
    ],
    "prom": [
        prom("-1", 2),
        prom("NaN", 3),
        prom("+Inf", 4),
        prom("-Inf", 5),
        prom("1e308", 6),
        prom("1", -7),
    ],
}


@pytest.mark.parametrize(("kind", "bad"), [(kind, bad) for kind, rows in BAD.items() for bad in rows])
def test_a_sample_out_of_range_is_dropped_and_counted(tmp_path: Path, kind: str, bad: str) -> None:
    log = read(tmp_path, HEAD[kind] + GOOD[kind] + bad)
    assert log.frame.height == 1 and log.frame["power_w"].to_list() == [250.0 if kind == "nvml" else 250.5]
    [line] = log.dropped
    assert line.startswith("1 of 2 samples dropped: ") and ("power_w outside" in line or "ts_unix_ns" in line)


@pytest.mark.parametrize("kind", ["nvml", "dmon", "smi", "prom"])
def test_a_repeated_sample_is_dropped_and_counted(tmp_path: Path, kind: str) -> None:
    log = read(tmp_path, HEAD[kind] + GOOD[kind] * 3)
    assert log.frame.height == 1
    assert log.dropped == ("2 repeated samples dropped (same device, time and values)",)


@pytest.mark.parametrize("kind", ["nvml", "dmon", "smi", "prom"])
def test_a_log_with_no_sample_in_range_fails(tmp_path: Path, kind: str) -> None:
    with pytest.raises(PowerLogError, match="power log has no sample in range"):
        read(tmp_path, HEAD[kind] + BAD[kind][0])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            SMI + smi("1", "0001/01/01 00:00:00.000"),
            r"ts_unix_ns -6213\d+ ns is beyond int64|line 2: timestamp",
        ),
        (SMI + smi("1", "9999-12-31T23:59:59+00:00"), "ts_unix_ns 253402300799000000000 ns is beyond int64"),
        (SMI + smi("1", "0001-01-01T00:00:00"), "line 2: timestamp '0001-01-01T00:00:00' is out of range"),
        (SMI + "2026/07/14 08:12:53.353, inf, 1 W\n", "line 2: GPU index 'inf' is not one"),
        (SMI + "2026/07/14 08:12:53.353, 1e12, 1 W\n", "device 1000000000000 is beyond int32"),
        (DMON + dmon("1", ts=10**23), r"line 4: stamp 10000000000000000000\.\.\. is beyond int64 ns"),
        (DMON + dmon("1", ts=9999999999999999999), "ts_unix_ns 9999999999999999999 ns is beyond int64"),
        (DMON + "1\tGPU 99999999999  1  40\n", "device 99999999999 is beyond int32"),
        (DMON + "1²\tGPU 0  1  40\n", "line 4 lacks the sampler's"),
        (prom("1", 10**20), r"line 1: timestamp 10000000000000000000\.\.\. is beyond int64"),
        (prom("1", 10**13), "ts_unix_ns 10000000000000000000 ns is beyond int64"),
        ('DCGM_FI_DEV_POWER_USAGE{gpu="zero"} 1\n', "line 1: gpu label 'zero' is not a GPU index"),
        (NVML + nvml("1", ts=10**23), "NVML log has a malformed row"),
    ],
)
def test_a_value_the_warehouse_cannot_store_fails_the_file_in_one_line(
    tmp_path: Path, text: str, reason: str
) -> None:
    with pytest.raises(PowerLogError, match=reason) as caught:
        read(tmp_path, text)
    assert "\n" not in str(caught.value) and str(caught.value).startswith(str(tmp_path / "p.log"))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (prom("250", 1) + prom("251", 1), r"line 2: a second DCGM_FI_DEV_POWER_USAGE of GPU 0 at one time"),
        (
            format_log_header(source="nvidia-smi", host="h", interval_ms=1, clock="c", utc_offset_s="2.5")
            + f"{TS}\t{SMI}",
            "utc_offset_s '2.5' is not a number of seconds within a day",
        ),
        (SMI + '2026/07/14 08:12:53.353, 0, "' + "1" * 200_000 + '"\n', "line 2: not a CSV row"),
        (
            '"x,index,y",timestamp,power.draw [W]\n1,2026/07/14 08:12:53.353,1 W\n',
            "line 1: expected a query-gpu header",
        ),
    ],
)
def test_malformed_logs_fail_in_one_line(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(PowerLogError, match=reason) as caught:
        read(tmp_path, text)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < len(str(tmp_path)) + 200


def test_a_repeated_header_may_name_the_device_column_anew(tmp_path: Path) -> None:
    text = SMI + smi("250") + "timestamp, gpu, power.draw [W]\n" + smi("251", "2026/07/14 08:12:54.353")
    assert read(tmp_path, text).frame["power_w"].to_list() == [250.0, 251.0]


@pytest.mark.parametrize(
    "text",
    [
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-1"' + "x" * 1_000_000 + ',Hostname="h"} 250 1\n',
        SMI.replace("power.draw [W]", "power.draw " + " " * 1_000_000 + "[W]") + smi("250"),
        SMI + smi("250") + "2026/07/14 08:12:54.353, 0, 1" + " " * 1_000_000 + "x W\n",
    ],
)
def test_a_megabyte_line_is_read_in_linear_time(tmp_path: Path, text: str) -> None:
    started = time.monotonic()
    with contextlib.suppress(PowerLogError):
        read(tmp_path, text)
    assert time.monotonic() - started < 5.0  # a quadratic regex took minutes
