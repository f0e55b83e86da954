"""nccl-tests values outside common.limits.NCCL_RANGES: the row is dropped and counted, never stored."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from support.testdata import shared_path
from tracehouse.pipeline.common.errors import InputFileError
from tracehouse.pipeline.parsers.nccl_tests.parse import parse_nccl_tests

ALLREDUCE = "nccl-tests/superbench-a100-8gpu-allreduce-v2old.txt"
ROW = 31  # `   16384   4096   float   sum   36.18 ...`
ROWS = 34


def edited(tmp_path: Path, change) -> Path:
    lines = shared_path(ALLREDUCE).read_text().split("\n")
    lines[ROW - 1] = change(lines[ROW - 1])
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text("\n".join(lines))
    return path


def size(text: str):
    return lambda line: re.sub(r"^( *)\d+", rf"\g<1>{text}", line)


def time_(text: str):
    return lambda line: line.replace("36.18", text)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (size("-16384"), "size '-16384' is not a byte count"),
        (size("abc"), "size 'abc' is not a byte count"),
        (size("1.6e4"), "size '1.6e4' is not a byte count"),
        (size("1" + "0" * 26), "bytes outside [0, 2.81475e+14]"),
        (time_("nan"), "time_us outside [0, 9.0072e+15]"),
        (time_("inf"), "time_us outside [0, 9.0072e+15]"),
        (time_("-inf"), "time_us outside [0, 9.0072e+15]"),
        (time_("-36.18"), "time_us outside [0, 9.0072e+15]"),
        (time_("1e308"), "time_us outside [0, 9.0072e+15]"),
        (lambda line: line.replace(" 4096 ", " -4096 "), "count outside [0, 2.81475e+14]"),
    ],
)
def test_a_row_out_of_range_is_dropped_and_counted(tmp_path: Path, change, why: str) -> None:
    result = parse_nccl_tests(edited(tmp_path, change))
    assert len(result.tests[0].points) == 2 * (ROWS - 1)
    assert result.dropped == ((why, 1),)
    assert result.dropped_lines() == [f"1 result rows dropped: {why} (1)"]
    frame = result.frame()
    assert frame["time_us"].is_finite().all() and frame["time_us"].min() >= 0 and frame["bytes"].min() >= 0
    assert ROW not in frame["line"].to_list()


def test_the_real_files_drop_nothing(shared_data: Path) -> None:
    for path in sorted((shared_data / "nccl-tests").glob("*.txt")):
        try:
            result = parse_nccl_tests(path)
        except InputFileError:
            continue  # the failure-only file
        assert result.dropped == (), path


def test_an_average_bandwidth_out_of_range_fails_the_file(tmp_path: Path) -> None:
    text = (
        shared_path(ALLREDUCE)
        .read_text()
        .replace("Avg bus bandwidth    : 68.4048", "Avg bus bandwidth : -inf")
    )
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(text)
    with pytest.raises(InputFileError, match=r"line \d+: average bus bandwidth '-inf' is out of range"):
        parse_nccl_tests(path)


def test_a_megabyte_rank_line_is_read_in_linear_time(tmp_path: Path) -> None:
    result = parse_nccl_tests(edited(tmp_path, lambda line: line))  # the file as it is, then a long rank line
    path = tmp_path / "all_reduce_perf.txt"
    lines = path.read_text().split("\n")
    lines[4] = lines[4].replace("A100", "A" + " " * 1_000_000 + "100")
    path.write_text("\n".join(lines))
    started = time.monotonic()
    assert parse_nccl_tests(path).tests[0].ranks == result.tests[0].ranks
    assert time.monotonic() - started < 5.0  # a lazy `.*?\s*$` took minutes


def test_a_root_beyond_int32_drops_its_row(tmp_path: Path) -> None:
    text = shared_path("nccl-tests/superbench-a100-8gpu-broadcast-v2old.txt").read_text()
    lines = text.split("\n")
    row = next(i for i, line in enumerate(lines) if re.match(r"^ +16384 ", line))
    lines[row] = re.sub(r"(float) +0 ", r"\1 4294967296 ", lines[row], count=1)
    path = tmp_path / "broadcast_perf.txt"
    path.write_text("\n".join(lines))
    assert parse_nccl_tests(path).dropped == (("root outside int32", 1),)


def test_a_library_version_code_of_a_million_digits_is_no_version(tmp_path: Path) -> None:
    text = shared_path("nccl-tests/xxrjun-h100-2node-alltoall-v2.17.txt").read_text()
    assert "nccl-library=22807" in text
    path = tmp_path / "alltoall_perf.txt"
    path.write_text(text.replace("nccl-library=22807", "nccl-library=" + "2" * 1_000_000))
    assert parse_nccl_tests(path).tests[0].nccl_version != "2.28.7"  # not Python's int() limit, not a bug
