"""Hand-written logs in tracehouse's sampler formats: dmon quirks, NVML round trip, bad files."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracehouse.collectors.power.nvml import format_row
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.common.power_log import NVML_HEADER, NVML_IDENTITY_HEADER, format_log_header
from tracehouse.pipeline.parsers.power.parse import parse_power_log
from tracehouse.pipeline.warehouse.schema import POWER_SAMPLES

DMON_HEAD = format_log_header(source="dcgmi", host="node7", interval_ms=100, clock="host-realtime-at-read")
# DCGM 4.6 layout (../shared/data/power/dcgm/dmon_header_layout_dcgm46.txt), trailing spaces kept.
HEADER = (
    "#Entity         POWER             TOTEC                   TMPTR        GPUTL             "
    "FBUSD             "
)
UNITS = (
    "ID               W                 mJ                      C                            "
    "                   "
)


def dmon_row(entity: str, *values: str) -> str:
    """A data row at the 4.6 column offsets [16, 34, 58, 71, 89]."""
    widths = (16, 18, 24, 13, 18, 18)
    return "".join(cell.ljust(width - 1) + " " for cell, width in zip((entity, *values), widths, strict=True))


def stamped(lines: list[tuple[int, str]]) -> str:
    return DMON_HEAD + "".join(f"{ts}\t{line}\n" for ts, line in lines)


def write(tmp_path: Path, text: str, name: str = "power.log") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_dmon_repeated_headers_na_sentinels_and_mig_entities(tmp_path: Path) -> None:
    text = stamped(
        [
            (1000, HEADER),
            (1001, UNITS),
            (2000, dmon_row("GPU 0", "250.125", "1234567", "45", "98", "40000")),
            (2000, dmon_row("GPU 1", "N/A", "9223372036854775792", "47", "4294967295", "39000")),
            (2001, dmon_row("GPU-I 3", "N/A", "N/A", "N/A", "N/A", "512")),
            (3000, HEADER),
            (3000, UNITS),  # dmon repeats its header while streaming
            (4000, dmon_row("GPU 0", "140737488355328.000", "1334567", "46", "99", "40001")),
        ]
    )
    frame = parse_power_log(write(tmp_path, text))
    assert frame.schema == pl.Schema(POWER_SAMPLES)
    assert frame.rows() == [
        ("node7", 0, 2000, 250.125, 1234.567, 45.0, 98.0, 40000.0, "dcgmi", "host-realtime-at-read"),
        ("node7", 0, 4000, None, 1334.567, 46.0, 99.0, 40001.0, "dcgmi", "host-realtime-at-read"),
        ("node7", 1, 2000, None, None, 47.0, None, 39000.0, "dcgmi", "host-realtime-at-read"),
    ]  # FP64 and INT64 blanks and an impossible utilisation are NULL; the GPU-I row is not a GPU


def test_dmon_old_layout_with_spaced_header(tmp_path: Path) -> None:
    """DCGM 2.x: `# Entity` right-aligned, unit line `Id`; profiling fields have no column yet."""
    text = stamped([(5, "# Entity  POWER  TENSO"), (5, "      Id      W"), (9, "   GPU 2  71.5  0.25")])
    assert parse_power_log(write(tmp_path, text)).select("device", "ts_unix_ns", "power_w").rows() == [
        (2, 9, 71.5)
    ]


def test_dmon_error_after_header_is_the_reason(tmp_path: Path) -> None:
    """Real DCGM issue #3: header, then an error instead of rows."""
    error = "Error setting watches. Result: The third-party Profiling module returned an unrecoverable error"
    path = write(tmp_path, stamped([(1, "# Entity  TENSO"), (1, "      Id"), (2, error)]))
    with pytest.raises(PowerLogError, match=r"no samples \(dcgmi said: Error setting watches"):
        parse_power_log(path)


def test_unstamped_dmon_text_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, f"{HEADER}\n{UNITS}\n{dmon_row('GPU 0', '250', '1', '45', '98', '4')}\n")
    with pytest.raises(
        PowerLogError, match="dcgmi dmon prints no timestamps; record it with tracehouse's sampler"
    ):
        parse_power_log(path)


def test_sampler_nvidia_smi_log_uses_the_recorded_offset(tmp_path: Path) -> None:
    head = format_log_header(
        source="nvidia-smi", host="n1", interval_ms=100, clock="nvidia-smi-localtime", utc_offset_s=19800
    )
    body = (
        "5\ttimestamp, index, uuid, power.draw [W], temperature.gpu, utilization.gpu [%], memory.used [MiB]\n"
        "6\t2026/07/14 08:12:53.353, 1, GPU-x, 631.95 W, 59, 100 %, 19818 MiB\n"
        "7\t2026/07/14 08:12:53.453, 1, GPU-x, [N/A], 59, [Not Supported], 19818 MiB\n"
    )
    frame = parse_power_log(write(tmp_path, head + body))
    # `date -u -d '2026-07-14 08:12:53 +0530' +%s` = 1783996973
    assert frame.select("host", "device", "ts_unix_ns", "power_w", "gpu_util_pct", "clock").rows() == [
        ("n1", 1, 1783996973_353_000_000, 631.95, 100.0, "nvidia-smi-localtime"),
        ("n1", 1, 1783996973_453_000_000, None, None, "nvidia-smi-localtime"),
    ]


def test_nvml_log_converts_vendor_units_once(tmp_path: Path) -> None:
    head = format_log_header(source="nvml", host="n2", interval_ms=100, clock="host-realtime")
    rows = format_row(
        10,
        0,
        {
            "power_mw": 312250,
            "energy_counter_mj": 9876543,
            "temperature_c": 61,
            "gpu_util_pct": 97,
            "mem_used_bytes": 3 << 30,
            "uuid": "GPU-4b1c55a1",
            "pci_bus_id": "00000000:9A:00.0",
        },
    )
    rows += format_row(11, 1, {"power_mw": 70000})  # unsupported readings stay empty
    frame = parse_power_log(write(tmp_path, f"{head}{NVML_IDENTITY_HEADER}\n{rows}"))
    assert frame.rows() == [
        ("n2", 0, 10, 312.25, 9876.543, 61.0, 97.0, 3072.0, "nvml", "host-realtime"),
        ("n2", 1, 11, 70.0, None, None, None, None, "nvml", "host-realtime"),
    ]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2**62), st.integers(0, 15), st.integers(0, 10**6), st.integers(0, 2**53)),
        min_size=1,
        max_size=20,
    )
)
def test_nvml_round_trip_is_exact(tmp_path_factory: pytest.TempPathFactory, rows: list[tuple]) -> None:
    text = (
        format_log_header(source="nvml", host="h", interval_ms=1, clock="host-realtime")
        + NVML_IDENTITY_HEADER
        + "\n"
    )
    text += "".join(
        format_row(ts, dev, {"power_mw": mw, "energy_counter_mj": mj}) for ts, dev, mw, mj in rows
    )
    path = tmp_path_factory.mktemp("nvml") / "p.csv"
    path.write_text(text)
    frame = parse_power_log(path)
    expected = sorted({(dev, ts, mw / 1000, mj / 1000) for ts, dev, mw, mj in rows})  # repeats dropped
    got = sorted(frame.select("device", "ts_unix_ns", "power_w", "energy_counter_j").rows())
    assert got == expected


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty power log"),
        (b"\n  \n", "empty power log"),
        (b"\x00\xff\xfe garbage", "not a text power log"),
        (b"hello,world\n1,2\n", "not a power log tracehouse can read"),
        (gzip.compress(b"timestamp, index, power.draw [W]\n")[:-6], "truncated or corrupt gzip"),
        (b"timestamp, index, power.draw [W]\n", "header but no sample rows"),
        (b"timestamp, index, power.draw [W]\n2026/07/14 08:12:53.353, 0\n", "line 2: 2 fields for 3 columns"),
        (
            b"timestamp, index, power.draw [W]\n2026/07/14 08:12:53.353, 0, hot\n",
            "line 2: 'hot' is not a number",
        ),
        (
            b"timestamp, index, power.draw [W]\nyesterday, 0, 1 W\n",
            "timestamp 'yesterday' is not a known format",
        ),
        (
            b'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 1\nDCGM_FI_DEV_POWER_USAGE{gpu="1"\n',
            "line 2 is not a Prometheus",
        ),
        (b'DCGM_FI_DEV_SM_CLOCK{gpu="0"} 1215\n', "no whole-GPU DCGM_FI_DEV_"),
        (
            b"# tracehouse power log: version=1 source=nvml\n" + NVML_HEADER.encode() + b"\n1,0,5\n",
            "NVML log row 2 has 3 fields, not 7",
        ),
        (
            b"# tracehouse power log: version=1 source=dcgmi\n1\t"
            + HEADER.encode()
            + b"\n2\tGPU 0  250.1  12\n",
            "line 3: 2 dmon values for 5 fields .truncated",
        ),
        (b"# tracehouse power log: version=1 source=dcgmi\nGPU 0 250\n", "lacks the sampler's"),
        (b"# tracehouse power log: version=9 source=nvml\n", "version '9' is not 1"),
        (b"# tracehouse power log: version=1 source=rapl\n", "unknown source 'rapl'"),
    ],
)
def test_bad_files_raise_one_line_naming_the_file(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "bad.log"
    path.write_bytes(content)
    with pytest.raises(PowerLogError, match=reason) as caught:
        parse_power_log(path)
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(PowerLogError, match=r"missing\.csv: cannot read power log"):
        parse_power_log(tmp_path / "missing.csv")
