"""Inputs that broke the parser (../shared/data/malformed, found by mutation fuzzing) and the limits.

The contract for each: `parse_trace` gives identical frames with and without the C scanner,
or raises TraceFormatError with the same one-line reason on both paths; nothing else escapes.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest
from support.testdata import shared_path
from support.tracebuilder import cpu_op, kernel, runtime, step, write_trace
from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.parsers.kineto.fastscan import available
from tracehouse.pipeline.parsers.kineto.limits import DEPTH_ERROR, MAX_DEPTH
from tracehouse.pipeline.parsers.kineto.parse import parse_trace
from tracehouse.pipeline.parsers.kineto.parsed import ParsedTrace
from tracehouse.pipeline.warehouse.partitions import TRACE_TABLES

FRAMES = TRACE_TABLES  # every frame of ParsedTrace that becomes a table
OK = None  # the expected reason of a file that parses

EXPECTED = {
    "F10_ubsan_shift_31digits.json": (
        "event 'a': ts 1.2345678901234568e+30 µs is out of range (|ts| < 2^53 µs)"
    ),
    "F11_ubsan_memcpy_null.json": OK,
    "F12_launch_overflow_mismatch.json": (
        "event 'cudaLaunchKernel': ts_unix_ns 9223373036854775807 "
        "(baseTimeNanoseconds 9223371036854775807 + ts) is out of range (int64)"
    ),
    "F1a_nonX_ts_1e400.json": "not a Kineto trace: Number out of range at traceEvents[1].ts",
    "F1b_noncomm_arg_1e400.json": (
        "not a Kineto trace: Number out of range at traceEvents[0].args.In msg nelems"
    ),
    "F1c_corr_4301_digits.json": (
        "not a Kineto trace: Integer value out of range at traceEvents[0].args.correlation"
    ),
    "F2a_depth995.json": DEPTH_ERROR,
    "F2b_depth100000.json": DEPTH_ERROR,
    "F3a_ts_9.3e18.json": "event 'a': ts 9300000000000000000 µs is out of range (|ts| < 2^53 µs)",
    "F3b_ts_1e17_int.json": "event 'a': ts 100000000000000000 µs is out of range (|ts| < 2^53 µs)",
    "F4a_base_1e29_step.json": "baseTimeNanoseconds 100000000000000000000000000000 is out of range (int64)",
    "F4b_base_1e29_comm.json": "baseTimeNanoseconds 100000000000000000000000000000 is out of range (int64)",
    "F4c_base_int64max_wrap.json": (
        "event 'a': ts_unix_ns 9223372036854776807 (baseTimeNanoseconds 9223372036854775807 + ts) "
        "is out of range (int64)"
    ),
    "F4d_base_1e40.json": "baseTimeNanoseconds 10000000000000000000... (41 digits) is out of range (int64)",
    "F5_ts_string_invalid_utf8.json": OK,
    "F6_top_invalid_utf8_and_type.json": (
        "not a Kineto trace: Expected `object`, got `int` at deviceProperties[0]"
    ),
    "F7a_pg_size_2e31.json": "distributedInfo.pg_config[0].pg_size 2147483648 is out of range (int32)",
    "F7b_pg_ranks_1e100.json": (
        "distributedInfo.pg_config[0].ranks[0] 10000000000000000000... (101 digits) is out of range (int32)"
    ),
    "F7c_comm_group_size_2e31.json": OK,
    "F8_step_4301_digits.json": OK,
    "F9_stream_nested500.json": OK,
    "P_escaped_keys.json": OK,
}


def outcome(path: Path, *, scanner: bool) -> ParsedTrace | str:
    """The parse, or the reason of its TraceFormatError (one line, naming the file)."""
    try:
        return parse_trace(path, scanner=scanner)
    except TraceFormatError as exc:
        message = str(exc)
        assert message == f"{path}: {exc.reason}" and "\n" not in message
        return exc.reason


def both(path: Path) -> ParsedTrace | str:
    """The msgspec path's outcome, asserted identical to the scanner's (where it is built)."""
    slow = outcome(path, scanner=False)
    if isinstance(slow, ParsedTrace):
        assert slow.meta.decoder == "msgspec"
    if not available():
        return slow
    fast = outcome(path, scanner=True)
    assert type(fast) is type(slow), (fast, slow)
    if isinstance(slow, str):
        assert fast == slow
        return slow
    for name in FRAMES:
        assert getattr(fast, name).equals(getattr(slow, name)), name
    assert fast.meta == dataclasses.replace(slow.meta, decoder=fast.meta.decoder)
    return slow


def test_every_malformed_file_has_an_expected_outcome() -> None:
    folder = shared_path("malformed")
    assert sorted(p.name for p in folder.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malformed_file(name: str) -> None:
    result = both(shared_path(f"malformed/{name}"))
    expected = EXPECTED[name]
    if expected is OK:
        assert isinstance(result, ParsedTrace), result
    else:
        assert isinstance(result, str), "parsed, but an error was expected"
        assert expected in result, result


def test_what_the_parsing_malformed_files_hold() -> None:
    def parsed(name: str) -> ParsedTrace:
        result = both(shared_path(f"malformed/{name}"))
        assert isinstance(result, ParsedTrace), result
        return result

    assert parsed("F11_ubsan_memcpy_null.json").events["name"].to_list() == ["a"]
    replaced = parsed("F5_ts_string_invalid_utf8.json")
    assert replaced.meta.utf8_replaced and replaced.events.height == 1
    assert parsed("F7c_comm_group_size_2e31.json").collectives["group_size"].to_list() == [None]
    assert parsed("F8_step_4301_digits.json").steps.is_empty()
    assert parsed("F9_stream_nested500.json").events["stream"].to_list() == [None]
    escaped = parsed("P_escaped_keys.json")
    assert escaped.events.select("ts_unix_ns", "external_id").row(0) == (1000, 5)


def test_deep_nesting_takes_linear_time() -> None:
    path = shared_path("malformed/F9_stream_nested500.json")
    start = time.perf_counter()
    parse_trace(path, scanner=False)
    assert time.perf_counter() - start < 3.0  # was 16 s: Polars walked the nested list per level


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# Where a deep value can sit, and how many levels lie above it (the top level is level 1).
PLACES = {
    "top-level member": (lambda v: [cpu_op("a", 1, 1)], {"deep": None}, 1),
    "event member": (lambda v: [{**cpu_op("a", 1, 1), "deep": v}], None, 3),
    "skipped arg": (lambda v: [cpu_op("a", 1, 1, args={"deep": v})], None, 4),
    "decoded arg": (lambda v: [cpu_op("record_param_comms", 1, 1, args={"Collective name": v})], None, 4),
    "metadata name": (
        lambda v: [cpu_op("a", 1, 1), {"ph": "M", "name": "thread_name", "args": {"name": v}}],
        None,
        4,
    ),
}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("bare", [False, True])
def test_nesting_limit_is_the_same_on_both_paths(tmp_path: Path, place: str, bare: bool) -> None:
    events, top, above = PLACES[place]
    if bare and top is not None:
        pytest.skip("a bare array has no top-level members")
    above -= bare  # a bare array is the events array: one level less
    for depth, fits in ((MAX_DEPTH - above, True), (MAX_DEPTH - above + 1, False)):
        path = tmp_path / f"d{depth}.json"
        value = "DEEP"
        write_trace(path, events(value), bare_array=bare, top=None if top is None else {"deep": value})
        path.write_bytes(path.read_bytes().replace(b'"DEEP"', nested(depth).encode()))
        result = both(path)
        assert isinstance(result, ParsedTrace) is fits, (depth, result)
        if not fits:
            assert result == DEPTH_ERROR


@pytest.mark.parametrize(
    ("text", "fits"),
    [
        (b"1.7976931348623157e308", True),  # the largest double
        (b"1.7976931348623159e308", False),  # rounds beyond it
        (b"-1e400", False),
        (b"1e-400", True),  # underflows to 0: msgspec decodes it
        (b"1" * 4300, True),
        (b"-" + b"1" * 4300, False),  # msgspec counts the sign
        (b"1" * 400 + b".5", False),
    ],
)
@pytest.mark.parametrize("where", ["instant ts", "pid", "comm arg", "hot arg"])
def test_number_limits_are_the_same_on_both_paths(
    tmp_path: Path, text: bytes, fits: bool, where: str
) -> None:
    events = {
        "instant ts": [cpu_op("a", 1, 1), {"ph": "i", "name": "m", "ts": "NUMBER", "pid": 1, "tid": 1}],
        "pid": [cpu_op("a", 1, 1), {"ph": "i", "name": "m", "ts": 1, "pid": "NUMBER", "tid": 1}],
        "comm arg": [cpu_op("a", 1, 1, args={"In msg nelems": "NUMBER"})],
        "hot arg": [cpu_op("a", 1, 1, args={"correlation": "NUMBER"})],
    }[where]
    path = write_trace(tmp_path / "n.json", events)
    path.write_bytes(path.read_bytes().replace(b'"NUMBER"', text))
    result = both(path)
    float_pid = where == "pid" and (b"." in text or b"e" in text)  # pid is an integer or text
    if fits and not float_pid:
        assert isinstance(result, ParsedTrace), result
    else:
        assert isinstance(result, str), "parsed, but an error was expected"
        assert fits or "out of range" in result, result


def test_top_level_integers_out_of_their_columns(tmp_path: Path) -> None:
    events = [cpu_op("a", 1, 1)]
    cases = [
        (
            {"distributed_info": {"rank": 0, "world_size": 2**65}},
            "distributedInfo.world_size 36893488147419103232",
        ),
        (
            {"distributed_info": {"rank": -(2**31) - 1}},
            "distributedInfo.rank -2147483649 is out of range (int32)",
        ),
        (
            {"base_time_ns": 10**30},
            "baseTimeNanoseconds 1000000000000000000000000000000 is out of range (int64)",
        ),
        ({"top": {"schemaVersion": 2**31}}, "schemaVersion 2147483648 is out of range (int32)"),
    ]
    for i, (kwargs, reason) in enumerate(cases):
        result = both(write_trace(tmp_path / f"t{i}.json", events, **kwargs))
        assert isinstance(result, str) and reason in result, result
    edge = {"rank": 2**31 - 1, "world_size": 2**31 - 1}
    assert isinstance(both(write_trace(tmp_path / "edge.json", events, distributed_info=edge)), ParsedTrace)


def test_times_at_the_int64_edge(tmp_path: Path) -> None:
    top = 2**63 - 1
    fits = write_trace(tmp_path / "fits.json", [cpu_op("a", 1, 1)], base_time_ns=top - 2000)
    assert both(fits).events.select("ts_unix_ns", "dur_ns").row(0) == (top - 1000, 1000)
    over = write_trace(tmp_path / "over.json", [cpu_op("a", 1, 1)], base_time_ns=top - 1999)
    assert "ts_unix_ns + dur_ns 9223372036854775808 (baseTimeNanoseconds" in both(over)
    # A negative duration is dropped, so only its start must fit.
    dropped = write_trace(
        tmp_path / "dropped.json", [cpu_op("a", 1, 1), cpu_op("b", 1, -5)], base_time_ns=top - 2000
    )
    assert both(dropped).meta.negative_dur_events == 1
    low = write_trace(tmp_path / "low.json", [cpu_op("a", -1, 1)], base_time_ns=-(2**63))
    assert "ts_unix_ns -9223372036854776808" in both(low)


def test_a_step_and_a_collective_with_a_huge_base_are_errors(tmp_path: Path) -> None:
    events = [
        step(1, 1, 5),
        runtime("cudaLaunchKernel", 2, 1, correlation=3),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 3, 1, correlation=3),
    ]
    result = both(write_trace(tmp_path / "t.json", events, base_time_ns=10**29))
    assert result == "baseTimeNanoseconds 100000000000000000000000000000 is out of range (int64)"


@pytest.mark.parametrize("ts", ['"12"', "true", "[1]", "{}"])
def test_a_complete_event_time_that_is_no_number(tmp_path: Path, ts: str) -> None:
    path = write_trace(tmp_path / "t.json", [cpu_op("a", 1, 1), cpu_op("odd", 2, 1)])
    path.write_bytes(path.read_bytes().replace(b'"ts":2', f'"ts":{ts}'.encode()))
    assert both(path).startswith("complete (ph=X) event 'odd': ts ")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    assert both(fifo) == "not a regular file"


def test_gloo_bytes_beyond_int64_are_null(tmp_path: Path) -> None:
    info = {"rank": 0, "pg_config": [{"pg_name": "0", "pg_size": 4, "ranks": [0, 1, 2, 3]}]}
    found = []
    for numel in (1000, 2**60):  # 2^60 floats: 2^62 bytes per rank, 2^64 gathered (Polars would wrap to 0)
        args = {"Input Dims": [[numel]], "Input type": ["float"]}
        path = write_trace(
            tmp_path / f"g{numel}.json", [cpu_op("gloo:all_gather", 2, 1, args=args)], distributed_info=info
        )
        found += both(path).collectives["bytes"].to_list()
    assert found == [16000, None]
