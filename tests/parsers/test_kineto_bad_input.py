"""Bad input: each case raises TraceFormatError with one line naming the file (or parses, where decided)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from support.tracebuilder import cpu_op, kernel, runtime, write_trace
from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.parsers.kineto.parse import parse_trace


def assert_error(path: Path, fragment: str) -> None:
    with pytest.raises(TraceFormatError) as info:
        parse_trace(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert "\n" not in message
    assert fragment in message, message


def test_missing_file(tmp_path: Path) -> None:
    assert_error(tmp_path / "nope.json", "does not exist")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_bytes(b"  \n")
    assert_error(path, "empty file")


def test_truncated_json(tmp_path: Path) -> None:
    good = write_trace(tmp_path / "t.json", [cpu_op("aten::mm", 1, 2)]).read_bytes()
    path = tmp_path / "truncated.json"
    path.write_bytes(good[: len(good) // 2])
    assert_error(path, "invalid JSON")


def test_corrupt_gzip(tmp_path: Path) -> None:
    data = gzip.compress(b'{"traceEvents": []}' * 100)
    path = tmp_path / "corrupt.json.gz"
    path.write_bytes(data[:20] + b"\x00" * 10 + data[30:])
    assert_error(path, "corrupt gzip")


@pytest.mark.parametrize("text", [b'{"a": 1}', b'{"traceEvents": []}'])
def test_object_without_events(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "noevents.json"
    path.write_bytes(text)
    assert_error(path, "no trace events")


@pytest.mark.parametrize("text", [b"[1, 2]", b'"just a string"', b"42"])
def test_json_that_is_not_a_trace(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "notatrace.json"
    path.write_bytes(text)
    assert_error(path, "not a Kineto trace")


def test_complete_events_without_ts_or_dur(tmp_path: Path) -> None:
    no_ts = {"ph": "X", "cat": "cpu_op", "name": "aten::first_bad", "pid": 1, "tid": 1, "dur": 3}
    no_dur = {"ph": "X", "cat": "cpu_op", "name": "aten::second_bad", "pid": 1, "tid": 1, "ts": 3}
    path = write_trace(tmp_path / "nots.json", [cpu_op("ok", 1, 1), no_ts, no_dur])
    assert_error(path, "2 complete (ph=X) events lack ts or dur; first: 'aten::first_bad'")


def test_integers_beyond_64_bits_in_args_are_ignored(tmp_path: Path) -> None:
    huge = 2**70 + 12345
    events = [
        runtime("cudaLaunchKernel", 10, 2, correlation=5, args={"commId": huge}),
        kernel("ncclDevKernel_AllReduce_RING_LL", 20, 4, correlation=5, args={"commHash": huge}),
        cpu_op("weird", 30, 1, args={"External id": huge, "stream": -huge}),
    ]
    parsed = parse_trace(write_trace(tmp_path / "bigint.json", events, base_time_ns=0))
    assert parsed.events.height == 3
    weird = parsed.events.row(2, named=True)
    assert (weird["external_id"], weird["stream"]) == (None, None)
    assert parsed.collectives["op"].to_list() == ["all_reduce"]


def test_invalid_utf8_in_names_is_replaced(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "utf8.json", [cpu_op("aten::PLACEHOLDER", 1, 2)])
    path.write_bytes(path.read_bytes().replace(b"PLACEHOLDER", b"bad\xff\xfename"))
    parsed = parse_trace(path)
    assert parsed.events["name"].to_list() == ["aten::bad\ufffd\ufffdname"]
    assert parsed.meta.utf8_replaced


@pytest.mark.parametrize("scanner", [True, False])
def test_invalid_utf8_in_op_args_is_replaced_on_both_paths(tmp_path: Path, scanner: bool) -> None:
    """An op's `Input type` text with invalid UTF-8 (Polars 2 raises on such a cast) keeps its op."""
    args = {"Input Dims": [[2, 3]], "Input type": ["PLACEHOLDER"], "Concrete Inputs": [""]}
    path = write_trace(tmp_path / "utf8_args.json", [cpu_op("aten::mm", 1, 2, args=args), cpu_op("b", 5, 1)])
    path.write_bytes(path.read_bytes().replace(b"PLACEHOLDER", b"fl\xffoat"))
    parsed = parse_trace(path, scanner=scanner)
    assert parsed.meta.decoder == ("scanner" if scanner else "msgspec")
    assert parsed.ops["input_types"].to_list()[:1] == ['["fl\ufffdoat"]']
    assert parsed.ops["input_dims"].to_list()[:1] == ["[[2,3]]"]


def test_unexpected_arg_types_use_the_loose_decoder(tmp_path: Path) -> None:
    events = [
        cpu_op("a", 1, 2, args={"correlation": "not-a-number", "device": [1, 2]}),
        cpu_op("b", 3, 2, args={"correlation": 7}),
    ]
    parsed = parse_trace(write_trace(tmp_path / "loose.json", events))
    assert parsed.extra["decoder"] == "loose"
    assert parsed.meta.decoder == "msgspec"
    assert parsed.events["correlation"].to_list() == [None, 7]
    assert parsed.events["device"].to_list() == [None, None]
