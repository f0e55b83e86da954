"""The C scanner path of parse_trace gives exactly what the msgspec path gives, or declines."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from support.testdata import SHARED_DATA, shared_path
from support.tracebuilder import cpu_op, kernel, process_name, runtime, thread_name, write_trace
from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.parsers.kineto.fastscan import available
from tracehouse.pipeline.parsers.kineto.parse import parse_trace
from tracehouse.pipeline.warehouse.partitions import TRACE_TABLES

pytestmark = pytest.mark.skipif(not available(), reason="the optional _kineto_scan extension is not built")

FRAMES = TRACE_TABLES  # every frame of ParsedTrace that becomes a table
TRACES = sorted(str(p.relative_to(SHARED_DATA)) for p in (SHARED_DATA / "traces").glob("*/*.json*"))
BASE = 1_700_000_000_000_000_000


def both(path: Path, decoder: str = "scan") -> tuple:
    """Parse with and without the scanner; assert identical results; return the scanner's."""
    fast, slow = parse_trace(path, scanner=True), parse_trace(path, scanner=False)
    assert fast.extra["decoder"] == decoder
    assert fast.meta.decoder == ("scanner" if decoder == "scan" else "msgspec")
    assert slow.extra["decoder"] in ("typed", "loose")
    assert slow.meta.decoder == "msgspec"
    for name in FRAMES:
        assert getattr(fast, name).equals(getattr(slow, name)), name
    assert fast.meta == dataclasses.replace(slow.meta, decoder=fast.meta.decoder)
    assert {**fast.extra, "decoder": ""} == {**slow.extra, "decoder": ""}
    return fast, slow


def patched(path: Path, old: bytes, new: bytes) -> Path:
    """Replace placeholder text in a written trace (for JSON the encoder never writes)."""
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new))
    return path


@pytest.mark.parametrize("relative", TRACES)
def test_every_real_trace_is_identical(relative: str) -> None:
    both(shared_path(relative))


def test_real_traces_are_all_found() -> None:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent")
    assert len(TRACES) >= 22


def test_the_environment_turns_the_scanner_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_trace(tmp_path / "env.json", [cpu_op("a", 1, 2)])
    assert parse_trace(path).meta.decoder == "scanner"
    monkeypatch.setenv("TRACEHOUSE_SCANNER", "0")
    assert parse_trace(path).meta.decoder == "msgspec"
    assert parse_trace(path).extra["decoder"] == "typed"
    monkeypatch.setenv("TRACEHOUSE_SCANNER", "1")
    assert parse_trace(path).meta.decoder == "scanner"


def test_escapes_and_surrogate_pairs_in_strings(tmp_path: Path) -> None:
    events = [cpu_op("NAME", 1, 2, pid="PID"), thread_name("PID", 100, "THREAD")]
    path = write_trace(tmp_path / "esc.json", events)
    path = patched(path, b'"NAME"', rb'"q\"b\\s\/\n\t\u00e9\ud83d\ude00"')
    path = patched(path, b'"PID"', rb'"\u0070id"')
    path = patched(path, b'"THREAD"', rb'"w\u00f6rker"')
    fast, _ = both(path)
    assert fast.events["name"].to_list() == ['q"b\\s/\n\té\U0001f600']
    assert fast.events["pid"].to_list() == ["pid"]
    assert fast.threads["thread_name"].to_list() == ["wörker"]


def test_invalid_utf8_is_replaced_like_the_msgspec_path(tmp_path: Path) -> None:
    events = [
        cpu_op("aten::PLACEHOLDER", 1, 2),
        cpu_op("ok", 3, 1, args={"Unused key": "SKIPPED"}),
    ]
    path = write_trace(tmp_path / "utf8.json", events)
    path = patched(path, b"PLACEHOLDER", b"bad\xff\xe2\x82name")
    path = patched(path, b"SKIPPED", b"\xfe")  # skipped value: msgspec never checks it
    fast, _ = both(path)
    assert fast.events["name"].to_list() == ["aten::bad\ufffd\ufffdname", "ok"]
    assert fast.meta.utf8_replaced


def test_invalid_utf8_only_in_skipped_values_is_not_flagged(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "skip.json", [cpu_op("a", 1, 2, args={"Unused key": "SKIPPED"})])
    fast, _ = both(patched(path, b"SKIPPED", b"\xfe"))
    assert not fast.meta.utf8_replaced


def test_big_ints_string_stream_and_legacy_external_id(tmp_path: Path) -> None:
    huge = 2**70 + 12345
    events = [
        runtime("cudaLaunchKernel", 10, 2, correlation=5, args={"commId": huge}),
        kernel(
            "ncclDevKernel_AllReduce_RING_LL", 20, 4, correlation=5, stream="0x0", args={"commHash": huge}
        ),
        cpu_op("weird", 30, 1, args={"External id": huge, "external id": 9, "device": 3}),
        cpu_op("legacy", 31, 1, args={"external id": 2**63 - 1, "stream": -huge}),
    ]
    fast, _ = both(write_trace(tmp_path / "bigint.json", events, base_time_ns=0))
    ev = fast.events
    assert ev["stream"].to_list() == [None, None, None, None]
    assert ev["external_id"].to_list() == [None, None, 9, 2**63 - 1]
    assert ev["device"].to_list() == [None, 0, 3, None]
    assert ev["correlation"].to_list() == [5, 5, None, None]


def test_negative_dur_int_and_float_ts(tmp_path: Path) -> None:
    events = [cpu_op("a", 12.345, 0.5), cpu_op("b", 7, -3), cpu_op("c", -0.25, 1.0), cpu_op("d", 8, 0)]
    fast, _ = both(write_trace(tmp_path / "t.json", events, base_time_ns=BASE))
    assert fast.events["ts_unix_ns"].to_list() == [BASE + 12345, BASE - 250, BASE + 8000]
    assert fast.events["dur_ns"].to_list() == [500, 1000, 0]
    assert fast.meta.negative_dur_events == 1


def test_absolute_epoch_decimal_ts_is_exact(tmp_path: Path) -> None:
    events = [
        cpu_op("a", Decimal("1712195495519689.047"), Decimal("0.0015")),
        cpu_op("b", 1712195495519690, 2),
    ]
    fast, _ = both(write_trace(tmp_path / "abs.json", events))
    assert fast.events["ts_unix_ns"].to_list() == [1712195495519689047, 1712195495519690000]
    assert fast.events["dur_ns"].to_list() == [2, 2000]  # 1.5 ns rounds half away from zero


def test_more_than_three_decimals(tmp_path: Path) -> None:
    agree = write_trace(tmp_path / "agree.json", [cpu_op("a", Decimal("1.00051"), Decimal("2.0004"))])
    fast, _ = both(agree)
    assert (fast.events["ts_unix_ns"].item(), fast.events["dur_ns"].item()) == (1001, 2000)
    # 1.0005 is 1.000499999... as a float: the two rules disagree, so the scanner declines.
    tie = write_trace(tmp_path / "tie.json", [cpu_op("a", Decimal("1.0005"), 1)])
    both(tie, decoder="typed")


@pytest.mark.parametrize(
    ("old", "new", "decoder"),
    [
        (b"123456", b"1.5e3", "typed"),  # exponent ts: not converted exactly by the scanner
        (b'"PID"', b'"012"', "typed"),  # Polars would read this pid as 12
        (b"424242", b'"text"', "loose"),  # a string correlation: the loose decoder's job
    ],
)
def test_inputs_the_scanner_declines(tmp_path: Path, old: bytes, new: bytes, decoder: str) -> None:
    events = [runtime("cudaLaunchKernel", 123456, 2, correlation=424242, pid="PID"), cpu_op("b", 1, 1)]
    path = patched(write_trace(tmp_path / "d.json", events), old, new)
    both(path, decoder=decoder)


def test_duplicate_keys_last_wins(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "dup.json", [cpu_op("first", 1, 2, args={"correlation": 1})])
    path = patched(path, b'"name":"first"', b'"name":"first","name":"second"')
    path = patched(path, b'"correlation":1', b'"correlation":1,"correlation":2')
    fast, _ = both(path)
    assert fast.events.select("name", "correlation").row(0) == ("second", 2)


def test_metadata_and_pid_numbers_as_text(tmp_path: Path) -> None:
    events = [
        cpu_op("a", 1, 2, pid=12, tid=-0),
        cpu_op("b", 3, 1, pid="12", tid="t"),
        thread_name(12, 0, "main"),
        process_name(12, "python"),
        {"ph": "M", "name": "thread_name", "pid": 12, "tid": "t", "args": {"name": 7}},
    ]
    fast, _ = both(write_trace(tmp_path / "m.json", events, bare_array=True))
    assert fast.events.select("pid", "tid").rows() == [("12", "0"), ("12", "t")]
    assert fast.threads.select("pid", "tid", "thread_name").rows() == [("12", "0", "main")]
    assert fast.meta.layout == "bare-array"


def test_no_complete_events_and_truncated_json_keep_their_errors(tmp_path: Path) -> None:
    from tracehouse.pipeline.common.errors import TraceFormatError

    empty = write_trace(tmp_path / "empty.json", [thread_name(1, 1, "x")])
    with pytest.raises(TraceFormatError, match="no trace events"):
        parse_trace(empty)
    cut = tmp_path / "cut.json"
    cut.write_bytes(write_trace(tmp_path / "whole.json", [cpu_op("a", 1, 2)]).read_bytes()[:-5])
    with pytest.raises(TraceFormatError, match="invalid JSON"):
        parse_trace(cut)


def test_device_outside_int32_is_null(tmp_path: Path) -> None:
    events = [
        cpu_op("in range", 1, 1, args={"device": -(2**31)}),
        cpu_op("just above", 2, 1, args={"device": 2**31}),
        cpu_op("int64", 3, 1, args={"device": -(2**40)}),
        cpu_op("max", 4, 1, args={"device": 2**31 - 1}),
    ]
    fast, _ = both(write_trace(tmp_path / "device.json", events, base_time_ns=0))
    assert fast.events["device"].to_list() == [-(2**31), None, None, 2**31 - 1]


def test_gpu_event_without_correlation_has_no_launch(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 5,
            "dur": 2,
            "args": {"stream": 7},
        },
        runtime("cudaLaunchKernel", 2, 1, correlation=9),
        runtime("cudaLaunchKernel", 3, 1, correlation=9),
        kernel("k2", 6, 2, correlation=9),
    ]
    fast, _ = both(write_trace(tmp_path / "nocorr.json", events, base_time_ns=0))
    assert fast.events["launch_ts_unix_ns"].to_list() == [None, None, None, None, 2000]


def test_launch_rule_matches_the_msgspec_path_at_scale(tmp_path: Path) -> None:
    """The scanner's launch table (a hash on correlation) agrees with the Polars window."""
    events = []
    for i in range(3000):
        corr = (i * 7919) % 100_003 - 50_000 if i % 3 else 2**62 + i  # negative, huge, colliding
        events.append(kernel(f"k{i % 5}", 10 + i, 1, correlation=corr, cat="Kernel" if i % 2 else "kernel"))
        events.append(runtime("cudaLaunchKernel", 5 + i, 1, correlation=corr, cat="Runtime"))
        if i % 4 == 0:  # an earlier call with the same correlation, but dropped for its negative dur
            events.append(runtime("cudaLaunchKernel", i, -1, correlation=corr))
    fast, _ = both(write_trace(tmp_path / "many.json", events, base_time_ns=0))
    gpu = fast.events.filter(pl.col("kind") == "kernel")
    assert gpu.height == 3000
    assert (gpu["launch_ts_unix_ns"] == gpu["ts_unix_ns"] - 5000).all()


def decision(path: Path, scanner: bool) -> tuple:
    """What one decoder makes of a trace: its events' times, or its error's reason."""
    try:
        parsed = parse_trace(path, scanner=scanner)
    except TraceFormatError as exc:
        return ("error", exc.reason)
    return ("events", parsed.events["ts_unix_ns"].to_list())


@pytest.mark.parametrize(
    "ts",
    [
        "9007199254740991.5",  # 2^53 - 0.5 = 2^53 - 1 + 0.5: a double rounds it to 2^53 (ties to even)
        "9007199254740991.50",
        "9007199254740991.75",
        "9007199254740991.25",  # rounds to 2^53 - 1: in range
        "9007199254740991.0",
        "9007199254740991",  # 2^53 - 1
        "9007199254740992",  # 2^53
        "9007199254740990.5",
        "-9007199254740991.5",
        "-9007199254740991",
    ],
)
def test_both_decoders_decide_alike_at_2_53_us(tmp_path: Path, ts: str) -> None:
    path = patched(write_trace(tmp_path / "t.json", [cpu_op("a", 123456, 1)]), b"123456", ts.encode())
    assert decision(path, scanner=True) == decision(path, scanner=False)
