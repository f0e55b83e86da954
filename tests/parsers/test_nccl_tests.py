"""The nccl-tests parser on every real output in ../shared/data/nccl-tests, with values copied from the
files by hand, on edited copies of them (CRLF, launcher prefixes, two tests, bad rows), and on tables a
small writer renders in the old and the newer layout (Hypothesis)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.testdata import shared_path
from tracehouse.pipeline.common.errors import InputFileError
from tracehouse.pipeline.discovery.sniff import is_nccl_tests_output
from tracehouse.pipeline.parsers.nccl_tests.format import strip_launcher_prefix
from tracehouse.pipeline.parsers.nccl_tests.parse import derived_ranks, parse_nccl_tests
from tracehouse.pipeline.parsers.nccl_tests.result import POINT_COLUMNS, NcclPoint

FOLDER = "nccl-tests"
FAILURE = "xxrjun-h100-2node-failure.txt"
A100 = ["A100-SXM4-40GB"]
H100 = ["NVIDIA H100 80GB HBM3"]


@dataclass(frozen=True)
class Expected:
    """What a file says, copied from its text: the test's facts, then its first and last result rows."""

    program: str
    program_from: str
    op: str
    ranks: int
    ranks_from: str
    nodes: int | None
    devices: list[str]
    nccl_version: str | None
    avg_busbw_gbps: float
    rows: int
    # (line, bytes, out-of-place time_us, busbw, check; in-place time_us, busbw, check)
    first: tuple
    last: tuple
    dtype: str = "float32"
    redop: str | None = None
    root: int | None = None


# fmt: off
EXPECTED = {
    "superbench-a100-8gpu-allreduce-v2old.txt": Expected(
        "all_reduce_perf", "file name", "all_reduce", 8, "rank lines", 1, A100, None, 68.4048, 34,
        (17, 0, 35.20, 0.00, None, 34.05, 0.00, None),
        (50, 8589934592, 63896, 235.26, None, 63959, 235.03, None),
        redop="sum",
    ),
    "superbench-a100-8gpu-alltoall-v2old.txt": Expected(
        "alltoall_perf", "file name", "all_to_all", 8, "rank lines", 1, A100, None, 58.6481, 34,
        (16, 0, 1.63, 0.00, None, 1.38, 0.00, None),
        (49, 8589934592, 33508, 224.31, None, 33234, 226.16, None),
    ),
    "superbench-a100-8gpu-broadcast-v2old.txt": Expected(
        "broadcast_perf", "file name", "broadcast", 8, "rank lines", 1, A100, None, 64.8653, 34,
        (17, 0, 34.61, 0.00, None, 34.33, 0.00, None),
        (50, 8589934592, 36896, 232.81, None, 36599, 234.70, None),
        root=0,
    ),
    "superbench-a100-8gpu-allgather-v2old.txt": Expected(
        "all_gather_perf", "file name", "all_gather", 8, "rank lines", 1, A100, None, 58.2651, 34,
        (17, 0, 34.27, 0.00, None, 33.57, 0.00, None),
        (50, 8589934592, 33646, 223.39, None, 32669, 230.07, None),
    ),
    "superbench-a100-8gpu-reducescatter-v2old.txt": Expected(
        "reduce_scatter_perf", "file name", "reduce_scatter", 8, "rank lines", 1, A100, None, 60.168, 34,
        (17, 0, 34.88, 0.00, None, 33.65, 0.00, None),
        (50, 8589934592, 32464, 231.52, None, 32502, 231.25, None),
        redop="sum",
    ),
    "xxrjun-h100-2node-alltoall-v2.17.txt": Expected(
        "alltoall_perf", "header", "all_to_all", 16, "rank lines", 2, H100, "2.28.7", 23.4963, 10,
        (26, 33554432, 1382.27, 22.76, 0, 1354.09, 23.23, None),
        (35, 17179869184, 682007, 23.62, 0, 681661, 23.63, None),
        dtype="float64",
    ),
    "xxrjun-h100-2node-sendrecv-v2.17.txt": Expected(
        "sendrecv_perf", "header", "send_recv", 16, "rank lines", 2, H100, "2.28.7", 15.1193, 10,
        (26, 33554432, 2240.64, 14.98, 0, 2234.66, 15.02, None),
        (35, 17179869184, 1134460, 15.14, 0, 1134334, 15.15, None),
        dtype="float64",
        redop="sum",
    ),
    "awsdoeks-t4-2node-efa-allreduce-tagged.txt": Expected(
        "all_reduce_perf", "file name", "all_reduce", 2, "rank lines", 2, ["Tesla T4"], "2.12.7", 1.15327, 31,
        (56, 0, 6.36, 0.00, 0, 6.40, 0.00, 0),
        (86, 1073741824, 344981, 3.11, 0, 344454, 3.12, 0),
        redop="sum",
    ),
    # No rank lines: n = 16 from busbw / algbw (2(n-1)/n = 1.875: 188.70 / 100.64 on its last row).
    "deepops-dgxa100-2node-ib-allreduce-tableonly.txt": Expected(
        "all_reduce_perf", "file name", "all_reduce", 16, "busbw/algbw", None, [], None, 53.7098, 30,
        (5, 8, 38.63, 0.00, 2e-07, 38.85, 0.00, 1e-07),
        (34, 4294967296, 42715, 188.53, 5e-07, 42677, 188.70, 5e-07),
        redop="sum",
    ),
}
# fmt: on
CHECK_COLUMN = {name: "error" if "v2old" in name or "deepops" in name else "wrong" for name in EXPECTED}


def shared(name: str) -> Path:
    return shared_path(f"{FOLDER}/{name}")


def row_of(frame: pl.DataFrame, line: int, check: str) -> tuple:
    """A result row as Expected writes it, from its two points."""
    out, inside = (
        frame.filter((pl.col("line") == line) & (pl.col("in_place") == placed)).row(0, named=True)
        for placed in (False, True)
    )
    return (
        line,
        out["bytes"],
        *(half[c] for half in (out, inside) for c in ("time_us", "busbw_gbps", check)),
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_shared_file_parses_to_what_its_text_says(name):
    expected = EXPECTED[name]
    result = parse_nccl_tests(shared(name))
    [test] = result.tests
    facts = (
        "program",
        "program_from",
        "op",
        "ranks",
        "ranks_from",
        "nodes",
        "nccl_version",
        "avg_busbw_gbps",
    )
    assert {f: getattr(test, f) for f in facts} == {f: getattr(expected, f) for f in facts}
    assert test.failure is None
    frame = result.frame()
    assert frame.schema == pl.Schema(POINT_COLUMNS)
    assert json.loads(frame["devices"][0]) == expected.devices
    # One out-of-place and one in-place point per row, the pair sharing line, size, count and type.
    assert frame.height == 2 * expected.rows == result.n_points
    pairs = frame.group_by("line").agg(pl.col("in_place").sort(), pl.col("bytes", "count").n_unique())
    assert pairs.height == expected.rows
    assert pairs["in_place"].to_list() == [[False, True]] * expected.rows
    assert pairs["bytes"].to_list() == pairs["count"].to_list() == [1] * expected.rows
    lines = frame["line"].unique().sort()
    check = CHECK_COLUMN[name]
    assert row_of(frame, lines[0], check) == expected.first
    assert row_of(frame, lines[-1], check) == expected.last
    other = "wrong" if check == "error" else "error"
    assert frame[other].null_count() == frame.height
    assert frame["dtype"].unique().to_list() == [expected.dtype]
    assert frame["redop"].unique().to_list() == [expected.redop]
    assert frame["root"].unique().to_list() == [expected.root]
    assert frame["bytes"].is_sorted() and frame["time_us"].min() > 0


def test_the_failure_file_is_one_line_naming_the_failure():
    path = shared(FAILURE)
    with pytest.raises(InputFileError) as raised:
        parse_nccl_tests(path)
    reason = "no result table (the test failed: 'remote process exited or there was a network error')"
    assert raised.value.reason == reason
    assert str(raised.value) == f"{path}: {reason}"


def test_every_shared_file_is_sniffed_as_nccl_tests_and_the_manifest_is_not():
    for name in [*EXPECTED, FAILURE]:
        assert is_nccl_tests_output(shared(name)), name
    assert not is_nccl_tests_output(shared("MANIFEST.md"))


def test_derived_ranks_equal_the_rank_lines_wherever_the_factor_is_not_1():
    """The busbw/algbw rule, checked on every file that also lists its ranks."""
    checked = 0
    for name, expected in EXPECTED.items():
        [test] = parse_nccl_tests(shared(name)).tests
        derived = derived_ranks(test.op, test.points)
        if test.op in ("broadcast", "send_recv"):
            assert derived is None, name
        elif expected.ranks_from == "rank lines":
            assert derived == test.ranks, name
            checked += 1
    assert checked == 6


def copy_as(tmp_path: Path, name: str, text: str) -> Path:
    """Edited text under the shared file's name (the name may tell the program)."""
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def test_crlf_file_equals_its_lf_copy(tmp_path):
    name = "deepops-dgxa100-2node-ib-allreduce-tableonly.txt"
    raw = shared(name).read_bytes()
    assert raw.count(b"\r\n") == raw.count(b"\n") > 30
    clean = copy_as(tmp_path, name, raw.decode().replace("\r\n", "\n"))
    assert parse_nccl_tests(clean).frame().equals(parse_nccl_tests(shared(name)).frame())


def test_tagged_file_equals_its_untagged_copy_with_or_without_the_info_lines(tmp_path):
    name = "awsdoeks-t4-2node-efa-allreduce-tagged.txt"
    lines = shared(name).read_text().split("\n")
    assert sum(line.startswith("[1,1]<stdout>:") for line in lines) > 20
    tagged = parse_nccl_tests(shared(name))
    untagged = [strip_launcher_prefix(line) for line in lines]
    assert untagged[0].startswith("# nThread 1 nGpus 1")
    same = parse_nccl_tests(copy_as(tmp_path / "a", name, "\n".join(untagged)))
    assert same.frame().equals(tagged.frame()) and same.tests == tagged.tests
    without_info = [line for line in untagged if " NCCL INFO " not in line]
    bare = parse_nccl_tests(copy_as(tmp_path / "b", name, "\n".join(without_info))).frame()
    assert bare.drop("line").equals(tagged.frame().drop("line"))
    srun = [f"{3:>2}: {line}" for line in without_info]  # srun -l
    assert parse_nccl_tests(copy_as(tmp_path / "c", name, "\n".join(srun))).frame().equals(bare)


def test_two_tests_in_one_file(tmp_path):
    texts = [shared(f"xxrjun-h100-2node-{op}-v2.17.txt").read_text() for op in ("alltoall", "sendrecv")]
    result = parse_nccl_tests(copy_as(tmp_path, "both.log", "".join(texts)))
    assert [(t.program, t.op, t.ranks, len(t.points)) for t in result.tests] == [
        ("alltoall_perf", "all_to_all", 16, 20),
        ("sendrecv_perf", "send_recv", 16, 20),
    ]
    frame = result.frame()
    assert frame.group_by("test_index").len().sort("test_index").rows() == [(0, 20), (1, 20)]
    assert frame.filter(pl.col("test_index") == 1)["line"].min() == 39 + 26  # 39 lines, then row 26


def test_a_failed_test_beside_one_with_results_loads_the_results(tmp_path):
    failure = shared(FAILURE).read_text().split("\n")
    second = failure.index("# Collective test starting: sendrecv_perf") - 1
    text = "\n".join(failure[:second]) + "\n" + shared("xxrjun-h100-2node-sendrecv-v2.17.txt").read_text()
    result = parse_nccl_tests(copy_as(tmp_path, "mixed.txt", text))
    assert [(t.program, len(t.points), t.failure) for t in result.tests] == [
        ("alltoall_perf", 0, "remote process exited or there was a network error"),
        ("sendrecv_perf", 20, None),
    ]
    assert result.failures() == ["alltoall_perf failed: 'remote process exited or there was a network error'"]
    assert result.frame().height == 20 and set(result.frame()["test_index"]) == {1}


def edited(tmp_path: Path, name: str, line: int, change) -> Path:
    """A copy of a shared file with one line (1-based) changed."""
    lines = shared(name).read_text().split("\n")
    lines[line - 1] = change(lines[line - 1])
    return copy_as(tmp_path, name, "\n".join(lines))


ALLREDUCE = "superbench-a100-8gpu-allreduce-v2old.txt"


@pytest.mark.parametrize(
    ("line", "change", "reason"),
    [
        (
            30,
            lambda s: s.replace(" sum ", " "),
            "line 30: a result row of 11 fields where the rows above it have 12",
        ),
        (17, lambda s: s + " 7", "line 17: a result row of 13 fields where the header has 12"),
        (31, lambda s: s.replace("36.18", "36.1x"), "line 31: time '36.1x' is not a number"),
        (31, lambda s: s.replace("N/A", "bad", 1), "line 31: error 'bad' is not a number"),
        (31, lambda s: re.sub(r"^( +\d+ +)\d+", r"\g<1>12e3", s), "line 31: count '12e3' is not an integer"),
        (14, lambda s: s.replace("busbw", "busBW"), "no result table: line 17 looks like a result row"),
        (14, lambda s: s.replace("error", "errs"), "line 14: a column header tracehouse does not know"),
    ],
)
def test_a_bad_line_names_its_number(tmp_path, line, change, reason):
    with pytest.raises(InputFileError, match=re.escape(reason)):
        parse_nccl_tests(edited(tmp_path, ALLREDUCE, line, change))


def test_numbers_in_the_exponent_form_nccl_tests_uses_for_large_values(tmp_path):
    """2.17 prints a value too wide for its cell as 1.2e+07, #wrong with %g."""
    name = "xxrjun-h100-2node-sendrecv-v2.17.txt"
    wide = edited(
        tmp_path, name, 26, lambda s: s.replace("2240.64", "2.2e+03").replace(" 0  2234", " 1.5e+07  2234")
    )
    point = parse_nccl_tests(wide).tests[0].points[0]
    assert (point.line, point.time_us, point.wrong) == (26, 2200.0, 15_000_000)
    bad = edited(tmp_path / "bad", name, 27, lambda s: s.replace("       0  4444", "     1.5  4444"))
    with pytest.raises(InputFileError, match=re.escape("line 27: #wrong '1.5' is not a count")):
        parse_nccl_tests(bad)


def printed(value: float, adaptive: bool) -> float:
    """A bandwidth as nccl-tests prints it: 2.17 with fewer decimals from 1000 up, older ones with two."""
    if not adaptive or value < 1000:
        return round(value, 2)
    return round(value, 1) if value < 1e4 else float(round(value))


def test_a_table_named_by_nothing_is_all_reduce_only_when_busbw_exceeds_algbw(tmp_path):
    deepops = shared("deepops-dgxa100-2node-ib-allreduce-tableonly.txt").read_text()
    [test] = parse_nccl_tests(copy_as(tmp_path, "results.txt", deepops)).tests
    assert (test.program, test.program_from, test.ranks) == ("all_reduce_perf", "busbw/algbw", 16)
    broadcast = shared("superbench-a100-8gpu-broadcast-v2old.txt").read_text()
    with pytest.raises(InputFileError, match="cannot tell which nccl-tests program wrote it"):
        parse_nccl_tests(copy_as(tmp_path, "results.log", broadcast))


def test_a_file_without_any_table_says_so(tmp_path):
    with pytest.raises(InputFileError, match=r"no result table \(no '# size count type"):
        parse_nccl_tests(copy_as(tmp_path, "x.txt", "# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n#\n"))


# ---------------------------------------------------------------- round trip of rendered tables

BUS_FACTOR = {
    "all_reduce_perf": lambda n: 2 * (n - 1) / n,
    "all_gather_perf": lambda n: (n - 1) / n,
    "reduce_scatter_perf": lambda n: (n - 1) / n,
    "alltoall_perf": lambda n: (n - 1) / n,
    "broadcast_perf": lambda n: 1.0,
    "sendrecv_perf": lambda n: 1.0,
}
OP = {
    "all_reduce_perf": "all_reduce",
    "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter",
    "alltoall_perf": "all_to_all",
    "broadcast_perf": "broadcast",
    "sendrecv_perf": "send_recv",
}


@dataclass(frozen=True)
class Row:
    size: int
    count: int
    cells: tuple  # (time_us, algbw, busbw, check) out of place, then in place


@dataclass(frozen=True)
class Table:
    program: str
    hosts: tuple[str, ...]  # one per rank
    device: str
    dtype: str
    rows: tuple[Row, ...]
    old_columns: tuple[str, ...]  # the old layout's optional columns: (), (redop,), (root,)
    avg: float


def hundredths(low: int, high: int) -> st.SearchStrategy[float]:
    return st.integers(low * 100, high * 100).map(lambda k: k / 100)


@st.composite
def tables(draw) -> Table:
    program = draw(st.sampled_from(sorted(BUS_FACTOR)))
    n = draw(st.integers(1, 12))
    per_host = draw(st.integers(1, 4))
    hosts = tuple(f"node-{rank // per_host}" for rank in range(n))
    rows = []
    for size in sorted(draw(st.sets(st.integers(0, 2**34), min_size=1, max_size=6))):
        halves = []
        for _ in range(2):
            check = draw(st.one_of(st.none(), st.integers(0, 99)))
            halves += [draw(hundredths(0, 99999)), draw(hundredths(0, 999)), draw(hundredths(0, 999)), check]
        rows.append(Row(size=size, count=size // 4, cells=tuple(halves)))
    columns = draw(st.sampled_from([(), ("redop",), ("root",)]))
    avg = draw(st.integers(0, 10**6)) / 1000
    return Table(program, hosts, "NVIDIA H200", "float", tuple(rows), columns, avg)


def cell(value, width: int) -> str:
    return f"{'N/A' if value is None else value:>{width}}"


def render_old(t: Table) -> str:
    """The old layout (no Group, error columns, one optional column or none, redop sum or blank)."""
    optional = {"redop": "sum" if t.program != "alltoall_perf" else "", "root": "0"}
    lines = [
        f"# nThread 1 nGpus {len(t.hosts)} minBytes 1 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 "
        "validation: 1",
        "#",
        "# Using devices",
        *(f"#   Rank {r:2d} Pid 1234 on {h} device {r:2d} [0x00] {t.device}" for r, h in enumerate(t.hosts)),
        "#",
        "#       size         count    type "
        + "".join(f"{c:>7} " for c in t.old_columns)
        + "    time   algbw   busbw  error     time   algbw   busbw  error",
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ]
    for row in t.rows:
        time_o, alg_o, bus_o, chk_o, time_i, alg_i, bus_i, chk_i = row.cells
        middle = "".join(f"{optional[c]:>7} " for c in t.old_columns)
        lines.append(
            f"{row.size:12d}  {row.count:12d}  {t.dtype:>6} {middle}{time_o:8.2f} {alg_o:7.2f} {bus_o:7.2f} "
            f"{cell(chk_o and chk_o / 1e7, 6)} {time_i:8.2f} {alg_i:7.2f} {bus_i:7.2f} "
            f"{cell(chk_i and chk_i / 1e7, 6)}"
        )
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {t.avg:g} ", "#"]
    return "\n".join(lines) + "\n"


def render_new(t: Table) -> str:
    """The 2.17 layout (version and starting lines, Group, redop and root always, #wrong)."""
    redop = "none" if t.program in ("all_gather_perf", "alltoall_perf", "broadcast_perf") else "sum"
    root = "0" if t.program == "broadcast_perf" else "-1"
    lines = [
        "# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22703",
        f"# Collective test starting: {t.program}",
        "# nThread 1 nGpus 1 minBytes 1 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
        "validation: 1 graph: 0",
        "#",
        "# Using devices",
        *(
            f"#  Rank {r:2d} Group  0 Pid {r:6d} on {h:>10} device  0 [0000:1b:00] {t.device}"
            for r, h in enumerate(t.hosts)
        ),
        "#",
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong ",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)        "
        "     (us)  (GB/s)  (GB/s)         ",
    ]
    for row in t.rows:
        time_o, alg_o, bus_o, chk_o, time_i, alg_i, bus_i, chk_i = row.cells
        lines.append(
            f"{row.size:12d}  {row.count:12d}  {t.dtype:>8}  {redop:>6}  {root:>6}  "
            f"{time_o:7.2f}  {alg_o:6.2f}  {bus_o:6.2f}  {cell(chk_o, 6)}  "
            f"{time_i:7.2f}  {alg_i:6.2f}  {bus_i:6.2f}  {cell(chk_i, 6)}"
        )
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {t.avg:g} ", "#"]
    lines += [f"# Collective test concluded: {t.program}", ""]
    return "\n".join(lines)


@settings(max_examples=60, deadline=None)
@given(table=tables(), new=st.booleans())
def test_rendered_tables_round_trip_in_both_layouts(tmp_path_factory, table, new):
    folder = tmp_path_factory.mktemp("rendered")
    path = folder / f"{table.program}.txt"  # the old layout names its program only in the file name
    path.write_text(render_new(table) if new else render_old(table))
    assert is_nccl_tests_output(path)
    [test] = parse_nccl_tests(path).tests
    facts = (test.program, test.op, test.ranks, test.nodes)
    assert facts == (table.program, OP[table.program], len(table.hosts), len(set(table.hosts)))
    assert test.hosts == table.hosts and set(test.devices) == {table.device}
    assert test.avg_busbw_gbps == float(f"{table.avg:g}")
    assert test.nccl_version == ("2.27.3" if new else None)
    check = "wrong" if new else "error"
    got = [
        (p.bytes, p.count, p.dtype, p.time_us, p.algbw_gbps, p.busbw_gbps, getattr(p, check))
        for p in test.points
    ]
    want = []
    for row in table.rows:
        for half in (row.cells[:4], row.cells[4:]):
            value = half[3] if new else (half[3] and half[3] / 1e7)
            want.append((row.size, row.count, "float32", *half[:3], value))
    assert got == want
    assert [p.in_place for p in test.points] == [False, True] * len(table.rows)
    redops = {p.redop for p in test.points}
    if new:
        assert redops == (
            {None} if table.program in ("all_gather_perf", "alltoall_perf", "broadcast_perf") else {"sum"}
        )
    else:
        assert redops == (
            {"sum"} if "redop" in table.old_columns and table.program != "alltoall_perf" else {None}
        )


@settings(max_examples=300, deadline=None)
@given(
    program=st.sampled_from(sorted(BUS_FACTOR)),
    n=st.integers(1, 1024),
    algbw=st.floats(0.01, 5000.0),
    adaptive=st.booleans(),
)
def test_derived_ranks_are_right_or_none(program, n, algbw, adaptive):
    """From printed (rounded) bandwidths the rule gives the true n or nothing, never another n; it
    decides every n up to 16 once algbw reaches 10 GB/s."""
    busbw = algbw * BUS_FACTOR[program](n)
    point = NcclPoint(
        line=1,
        bytes=1 << 30,
        count=1 << 28,
        dtype="float32",
        redop=None,
        root=None,
        in_place=False,
        time_us=1.0,
        algbw_gbps=printed(algbw, adaptive),
        busbw_gbps=printed(busbw, adaptive),
        wrong=None,
        error=None,
    )
    derived = derived_ranks(OP[program], [point])
    if program in ("broadcast_perf", "sendrecv_perf"):
        assert derived is None
        return
    assert derived in (None, n)
    if n <= 16 and algbw >= 10:
        assert derived == n
