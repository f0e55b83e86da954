"""`tracehouse calibrate`: the nccl-tests layout writer, and a real gloo sweep under torchrun.

The writer is checked three ways: a hand-written table (exact text), the two real nccl-tests
2.17 files of ../shared/data re-rendered from their own numbers (identical but for the Avg
line, which nccl-tests computes from unrounded values), and the project's nccl-tests parser
reading what a real sweep wrote. The sweep (2 ranks, 1 KiB to 64 KiB, 3 iterations; about 5 s
on 2 cores) is run once for the module.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import socket
from pathlib import Path

import pytest
from tracehouse.collectors.calibrate.launch import LOG_NAME, REPORT_NAME
from tracehouse.collectors.calibrate.nccl_layout import RunHeader, float_str, render
from tracehouse.collectors.calibrate.results import OpTable, Placement, RankInfo, SizeRow
from tracehouse.collectors.calibrate.spec import OPS, CalibrationSpec, default_spec, perf_file_name
from tracehouse.pipeline.cli.main import main

HEADER = RunHeader(
    version="tracehouse-calibrate 0.1.0 backend=gloo torch=2.13.0",
    min_bytes=1024,
    max_bytes=2048,
    warmup=5,
    iters=20,
)
RANKS = (
    RankInfo(rank=0, pid=4242, host="node-a", device=0, bus_id="cpu", name="Test CPU"),
    RankInfo(rank=1, pid=4243, host="node-b", device=1, bus_id="cpu", name="Test CPU"),
)
TINY = OpTable(
    op="all_reduce",
    rows=(
        SizeRow(
            size_bytes=1024,
            count=256,
            dtype="float",
            redop="sum",
            root=-1,
            out_of_place=Placement(time_us=5.5, algbw_gbps=0.25, busbw_gbps=0.25, wrong=0),
            in_place=Placement(time_us=12345.6, algbw_gbps=0.08, busbw_gbps=0.08, wrong=None),
        ),
        SizeRow(
            size_bytes=2048,
            count=512,
            dtype="float",
            redop="sum",
            root=-1,
            out_of_place=Placement(time_us=123456.7, algbw_gbps=1234.5, busbw_gbps=1234.5, wrong=3),
            in_place=Placement(time_us=1234567.0, algbw_gbps=12345.6, busbw_gbps=12345.6, wrong=0),
        ),
    ),
)
TINY_TEXT = """\
# nccl-tests version tracehouse-calibrate 0.1.0 backend=gloo torch=2.13.0
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on     node-a device  0 [cpu] Test CPU
#  Rank  1 Group  0 Pid   4243 on     node-b device  1 [cpu] Test CPU
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
        1024           256     float     sum      -1     5.50    0.25    0.25       0  12345.6    0.08    0.08    N/A
        2048           512     float     sum      -1   123457  1234.5  1234.5       3  1234567   12346   12346       0
# Out of bounds values : 1 FAILED
# Avg bus bandwidth    : 3395.11 
#
# Collective test concluded: all_reduce_perf
"""  # noqa: E501, W291 (nccl-tests' lines are long, its header lines end in spaces)


def test_the_writer_prints_a_tiny_table_exactly_as_nccl_tests():
    assert render(TINY, RANKS, HEADER) == TINY_TEXT


@pytest.mark.parametrize(
    ("value", "width", "text"),
    [
        # nccl-tests 2.17's getFloatStr: two decimals, fewer as the integer part grows, then %e
        (0.0, 6, "  0.00"),
        (5.5, 7, "   5.50"),
        (2240.64, 7, "2240.64"),
        (17752.8, 7, "17752.8"),
        (141799.0, 7, " 141799"),
        (1134460.0, 7, "1134460"),
        (12345678.0, 7, "1.2e+07"),
        (15.14, 6, " 15.14"),
        (123.45, 6, "123.45"),
        (12345.6, 6, " 12346"),
        (1234.5, 6, "1234.5"),
        (123456.0, 6, "123456"),
        (1234567.0, 6, " 1e+06"),
    ],
)
def test_numbers_take_the_decimals_nccl_tests_gives_them(value, width, text):
    assert float_str(value, width) == text


def read_table(text: str) -> tuple[list[RankInfo], list[SizeRow], RunHeader]:
    """A real nccl-tests 2.17 file's ranks, rows and header, read with plain regular expressions."""
    lines = text.splitlines()
    ranks = [
        RankInfo(
            rank=int(m[1]),
            group=int(m[2]),
            pid=int(m[3]),
            host=m[4],
            device=int(m[5]),
            bus_id=m[6],
            name=m[7],
        )
        for m in (
            re.match(
                r"#  Rank +(\d+) Group +(\d+) Pid +(\d+) on +(\S+) device +(\d+) \[([^\]]*)\] (.*)", line
            )
            for line in lines
        )
        if m
    ]

    def placement(cells: list[str]) -> Placement:
        wrong = None if cells[3] == "N/A" else int(cells[3])
        return Placement(
            time_us=float(cells[0]), algbw_gbps=float(cells[1]), busbw_gbps=float(cells[2]), wrong=wrong
        )

    rows = [
        SizeRow(
            size_bytes=int(f[0]),
            count=int(f[1]),
            dtype=f[2],
            redop=f[3],
            root=int(f[4]),
            out_of_place=placement(f[5:9]),
            in_place=placement(f[9:13]),
        )
        for f in (line.split() for line in lines if line and not line.startswith("#"))
    ]
    m = re.search(r"minBytes (\d+) maxBytes (\d+) .*warmup iters: (\d+) iters: (\d+)", text)
    assert m
    header = RunHeader(
        version=lines[0].removeprefix("# nccl-tests version "),
        min_bytes=int(m[1]),
        max_bytes=int(m[2]),
        warmup=int(m[3]),
        iters=int(m[4]),
    )
    return ranks, rows, header


@pytest.mark.shared_data
@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("xxrjun-h100-2node-sendrecv-v2.17.txt", "sendrecv"),
        ("xxrjun-h100-2node-alltoall-v2.17.txt", "alltoall"),
    ],
)
def test_real_nccl_tests_files_come_back_from_their_own_numbers(shared_data, name, op):
    text = (shared_data / "nccl-tests" / name).read_text()
    ranks, rows, header = read_table(text)
    assert len(ranks) == 16 and len(rows) > 3
    mine = render(OpTable(op=op, rows=tuple(rows)), tuple(ranks), header).splitlines()
    real = text.splitlines()
    avg = next(i for i, line in enumerate(real) if line.startswith("# Avg bus bandwidth"))
    assert mine[:avg] + mine[avg + 1 :] == real[:avg] + real[avg + 1 :]
    # the Avg line: same layout; its value is the mean of the printed (rounded) busbw here
    assert re.fullmatch(r"# Avg bus bandwidth    : [0-9.]+ ", mine[avg])
    assert float(mine[avg].split(":")[1]) == pytest.approx(float(real[avg].split(":")[1]), abs=0.005)


def test_the_spec_refuses_what_cannot_be_measured():
    with pytest.raises(ValueError, match="one float per rank"):
        CalibrationSpec(world_size=512, backend="gloo", min_bytes=1024, max_bytes=4096)
    with pytest.raises(ValueError, match="less than min bytes"):
        CalibrationSpec(world_size=2, backend="gloo", min_bytes=4096, max_bytes=1024)
    with pytest.raises(ValueError, match="ops must be distinct names"):
        CalibrationSpec(world_size=2, backend="gloo", min_bytes=1024, max_bytes=1024, ops=("all_to_all",))
    with pytest.raises(ValueError, match="unknown backend"):
        CalibrationSpec(world_size=2, backend="mpi", min_bytes=1024, max_bytes=1024)
    spec = default_spec(world_size=512, backend="gloo")  # the default smallest size holds a float per rank
    assert (spec.min_bytes, spec.max_bytes) == (2048, 4 * 1024 * 1024)
    assert CalibrationSpec(world_size=2, backend="gloo", min_bytes=1000, max_bytes=8000).sizes() == [
        1000,
        2000,
        4000,
        8000,
    ]


def test_a_bad_flag_is_one_line_and_exit_status_2(tmp_path, capsys):
    code = main(["calibrate", "--world-size", "2", "--out", str(tmp_path), "--ops", "all_reduce,nope"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "nope" in err
    assert not any(tmp_path.iterdir())  # nothing launched, nothing written


# --- a real sweep --------------------------------------------------------------------------

WORLD = 2
SIZES = [1024 * 2**i for i in range(7)]  # 1 KiB .. 64 KiB
COLUMN_LINES = TINY_TEXT.splitlines()[8:11]  # the placements title, column names and units
# Per op, the elements printed for a size in bytes at 2 ranks (nccl-tests' paramcount).
COUNT = {
    "all_reduce": lambda size: size // 4,
    "all_gather": lambda size: size // 8,
    "reduce_scatter": lambda size: size // 8,
    "alltoall": lambda size: size // 8,
    "broadcast": lambda size: size // 4,
    "sendrecv": lambda size: size // 4,
}
# busbw / algbw at 2 ranks: 2(n-1)/n for all_reduce, (n-1)/n for the gather/scatter family, else 1.
FACTOR_AT_2 = {
    "all_reduce": 1.0,
    "all_gather": 0.5,
    "reduce_scatter": 0.5,
    "alltoall": 0.5,
    "broadcast": 1.0,
    "sendrecv": 1.0,
}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """One real 2-rank gloo sweep of every op; (its folder, the command's stdout lines)."""
    out = tmp_path_factory.mktemp("calibration")
    printed = io.StringIO()
    argv = ["calibrate", "--world-size", str(WORLD), "--out", str(out), "--max-bytes", "65536"]
    with contextlib.redirect_stdout(printed):
        code = main([*argv, "--iters", "3", "--warmup", "1", "--backend", "gloo"])
    assert code == 0, (out / LOG_NAME).read_text()[-3000:]
    return out, printed.getvalue().splitlines()


@pytest.mark.slow
def test_the_command_prints_one_line_per_op_and_names_the_folder(sweep):
    out, lines = sweep
    progress = lines[1:-1]
    assert [line.split(":")[0] for line in progress] == [OPS[op].program for op in OPS]
    assert all("no wrong results" in line for line in progress)
    assert str(out) in lines[-1] and "6 nccl-tests file(s)" in lines[-1]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [perf_file_name(op) for op in OPS] + [REPORT_NAME, LOG_NAME]
    )


def cells_of(line: str) -> list[str]:
    cells = line.split()
    assert len(cells) == 13, line  # size count type redop root, then 4 cells per placement
    return cells


@pytest.mark.slow
@pytest.mark.parametrize("op", list(OPS))
def test_each_file_has_the_nccl_tests_layout_and_sound_numbers(sweep, op):
    out, _ = sweep
    lines = (out / perf_file_name(op)).read_text().splitlines()
    program = f"{op}_perf"
    assert lines[0].startswith("# nccl-tests version tracehouse-calibrate ") and "backend=gloo" in lines[0]
    assert lines[1] == f"# Collective test starting: {program}"
    assert lines[2] == (
        "# nThread 1 nGpus 1 minBytes 1024 maxBytes 65536 step: 2(factor) warmup iters: 1 iters: 3 "
        "agg iters: 1 validation: 1 graph: 0"
    )
    assert lines[3:5] == ["#", "# Using devices"]
    host = socket.gethostname()
    for rank in range(WORLD):
        assert re.fullmatch(
            rf"#  Rank {rank:2d} Group  0 Pid +\d+ on +{re.escape(host)} device {rank:2d} \[cpu\] \S.*",
            lines[5 + rank],
        ), lines[5 + rank]
    body = 5 + WORLD
    assert lines[body] == "#" and lines[body + 1 : body + 4] == COLUMN_LINES
    rows = lines[body + 4 : body + 4 + len(SIZES)]
    busbws = []
    for size, line in zip(SIZES, rows, strict=True):
        cells = cells_of(line)
        assert [int(cells[0]), int(cells[1])] == [size, COUNT[op](size)]
        assert cells[2:5] == ["float", OPS[op].redop, str(OPS[op].root)]
        for first, in_place in ((5, False), (9, True)):
            time_us, algbw, busbw = (float(c) for c in cells[first : first + 3])
            assert time_us > 0
            # GB/s = bytes / (1e3 * us), each printed to 2 decimals (time to >= 5 digits)
            assert algbw == pytest.approx(size / (1e3 * time_us), abs=0.0051, rel=1e-3)
            assert busbw == pytest.approx(algbw * FACTOR_AT_2[op], abs=0.0051 * (1 + FACTOR_AT_2[op]))
            unchecked = in_place and not OPS[op].in_place_validated
            assert cells[first + 3] == ("N/A" if unchecked else "0")
            busbws.append(busbw)
    footer = lines[body + 4 + len(SIZES) :]
    assert footer[0] == "# Out of bounds values : 0 OK"
    assert re.fullmatch(r"# Avg bus bandwidth    : \S+ ", footer[1])
    assert float(footer[1].split(":")[1]) == pytest.approx(sum(busbws) / len(busbws), abs=0.0051)
    assert footer[2:] == ["#", f"# Collective test concluded: {program}"]


@pytest.mark.slow
def test_calibration_json_says_what_ran_where(sweep):
    import torch

    out, _ = sweep
    report = json.loads((out / REPORT_NAME).read_text())
    assert report["world_size"] == WORLD and report["backend"] == "gloo"
    assert report["hosts"] == [socket.gethostname()] and report["nodes"] == 1
    assert report["torch_version"] == torch.__version__ and report["nccl_version"] is None
    assert report["sizes_bytes"] == SIZES and report["dtype"] == "float"
    assert report["spec"]["iters"] == 3 and report["spec"]["warmup"] == 1
    assert report["files"] == {op: perf_file_name(op) for op in OPS}
    assert report["skipped"] == {}
    assert [r["rank"] for r in report["ranks"]] == list(range(WORLD))
    assert report["wall_s"] > 0 and report["log"] == LOG_NAME
    assert set(report["method"]) == {
        "time",
        "sizes",
        "in_place_only",
        "in_place_unvalidated",
        "call_overhead",
    }


@pytest.mark.slow
def test_the_per_call_overhead_is_measured_and_taken_out_of_every_time(sweep):
    """The replay counts a traced call's host time apart from its transfer: the files hold the
    measured time less the host time of a call that moves nothing (at least 1 % of it kept)."""
    out, _ = sweep
    report = json.loads((out / REPORT_NAME).read_text())
    overhead = report["call_overhead_us"]
    assert overhead > 0
    uncorrected = report["uncorrected_time_us"]
    assert set(uncorrected) == set(OPS)
    for op in OPS:
        lines = (out / perf_file_name(op)).read_text().splitlines()
        rows = [cells_of(line) for line in lines if line and not line.startswith("#")]
        assert len(rows) == len(SIZES) == len(uncorrected[op])
        for cells, measured in zip(rows, uncorrected[op], strict=True):
            for printed, before in zip((cells[5], cells[9]), measured, strict=True):
                want = max(before - overhead, 0.01 * before)
                # printed to 2 decimals, fewer above 9999.99 (five significant digits at least)
                assert float(printed) == pytest.approx(want, rel=1e-4, abs=0.0051), (op, before, overhead)


@pytest.mark.slow
def test_the_nccl_tests_parser_reads_the_sweep_like_real_output(sweep):
    from tracehouse.pipeline.parsers.nccl_tests.parse import parse_nccl_tests

    out, _ = sweep
    for op in OPS:
        result = parse_nccl_tests(out / perf_file_name(op))
        (test,) = result.tests
        assert test.program == OPS[op].program and test.program_from == "header"
        assert test.failure is None
        assert (test.ranks, test.ranks_from, test.nodes) == (WORLD, "rank lines", 1)
        assert test.hosts == (socket.gethostname(),) * WORLD
        assert sorted({p.bytes for p in test.points}) == SIZES
        assert [p.in_place for p in test.points] == [False, True] * len(SIZES)
        assert {p.dtype for p in test.points} == {"float32"}
        assert all(p.time_us > 0 for p in test.points)
        checked = [p.wrong for p in test.points if not p.in_place or OPS[op].in_place_validated]
        assert set(checked) == {0}


@pytest.mark.slow
def test_an_op_gloo_cannot_run_is_skipped_and_said(tmp_path):
    printed = io.StringIO()
    argv = ["calibrate", "--world-size", "1", "--out", str(tmp_path), "--ops", "sendrecv,broadcast"]
    with contextlib.redirect_stdout(printed):
        code = main([*argv, "--max-bytes", "1024", "--iters", "2", "--warmup", "1"])
    lines = printed.getvalue().splitlines()
    assert code == 0
    assert lines[1].startswith("sendrecv_perf: skipped: gloo connects a rank to no one at world size 1")
    assert lines[-1].endswith("skipped sendrecv (why: calibration.json)")
    assert not (tmp_path / perf_file_name("sendrecv")).exists()
    assert (tmp_path / perf_file_name("broadcast")).is_file()
    report = json.loads((tmp_path / REPORT_NAME).read_text())
    assert list(report["skipped"]) == ["sendrecv"] and "world size 1" in report["skipped"]["sendrecv"]
    assert report["files"] == {"broadcast": perf_file_name("broadcast")}


def test_a_sweep_past_its_timeout_is_one_line_naming_the_log(tmp_path, capsys):
    code = main(["calibrate", "--world-size", "2", "--out", str(tmp_path), "--timeout", "0.5"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "timed out after 0.5 s" in err and str(tmp_path / LOG_NAME) in err
    assert not (tmp_path / REPORT_NAME).exists()
