"""OPS, OP_LAUNCHES and MEMORY_EVENTS on a hand-made trace: every value computed by hand.

op_id is the event's index among the complete events, so the indices below follow the order of
`EVENTS` (the memory and metadata events are not complete events and take no index).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from support.tracebuilder import annotation, cpu_op, kernel, runtime, write_trace
from tracehouse.pipeline.parsers.kineto.fastscan import available
from tracehouse.pipeline.parsers.kineto.parse import parse_trace

BASE = 1_700_000_000_000_000_000
MAIN, AUTOGRAD, OTHER = 100, 200, 300  # tids (pid 100)
LINEAR_ARGS = {
    "Sequence number": 5,
    "Fwd thread id": 0,
    "Input Dims": [[2, 3], [4, 3]],
    "Input type": ["float", "float"],
    "Concrete Inputs": ["", ""],
}


def module(name: str, ts: float, dur: float, tid: int = MAIN) -> dict:
    """An `nn.Module:` python_function event (with_modules=True)."""
    return {
        "ph": "X",
        "cat": "python_function",
        "name": f"nn.Module: {name}",
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "dur": dur,
    }


def memory(ts: float, args: dict, name: str = "[memory]") -> dict:
    """An instant event as profile_memory writes it."""
    return {
        "ph": "i",
        "s": "t",
        "cat": "cpu_instant_event",
        "name": name,
        "pid": 100,
        "tid": MAIN,
        "ts": ts,
        "args": args,
    }


EVENTS = [
    module("Net_0", 0, 100),  # 0
    cpu_op("aten::linear", 10, 50, tid=MAIN, args=LINEAR_ARGS),  # 1
    cpu_op("aten::addmm", 15, 40, tid=MAIN, args={"Sequence number": 6, "Fwd thread id": 0}),  # 2
    runtime("cudaLaunchKernel", 20, 5, correlation=1, tid=MAIN),  # 3
    kernel("gemm", 30, 10, correlation=1),  # 4
    module("Linear_1", 60, 30),  # 5: starts where aten::linear ends: not inside it
    cpu_op("aten::relu", 65, 10, tid=MAIN, args={"External id": 77}),  # 6
    runtime("cudaLaunchKernel", 67, 2, correlation=2, tid=MAIN),  # 7
    kernel("relu_kernel", 80, 5, correlation=2),  # 8
    annotation("outside", 200, 10, tid=MAIN),  # 9
    cpu_op("AddmmBackward0", 300, 50, tid=AUTOGRAD, args={"Sequence number": 6, "Fwd thread id": 1}),  # 10
    cpu_op("aten::mm", 310, 20, tid=AUTOGRAD),  # 11
    runtime("cudaLaunchKernel", 315, 3, correlation=3, tid=AUTOGRAD),  # 12
    kernel("gemm_bwd", 320, 5, correlation=3),  # 13
    kernel("copy", 400, 1, cat="gpu_memcpy", args={"External id": 77}),  # 14: linked by External id
    kernel("orphan", 410, 1, correlation=99),  # 15: no runtime call with correlation 99
    cpu_op("x", 0, 10, tid=OTHER),  # 16
    cpu_op("y", 5, 10, tid=OTHER),  # 17: ends after x: not inside it
    cpu_op("z", 12, 1, tid=OTHER),  # 18: inside y only
    cpu_op("same_a", 500, 10, tid=OTHER),  # 19
    cpu_op("same_b", 500, 10, tid=OTHER),  # 20: the same interval, later in the file: inside same_a
    memory(
        50,
        {
            "Device Type": 1,
            "Device Id": 0,
            "Addr": 140000,
            "Bytes": 1024,
            "Total Allocated": 1024,
            "Total Reserved": 2097152,
        },
    ),
    memory(
        90.5,
        {
            "Device Type": 1,
            "Device Id": 0,
            "Addr": 140000,
            "Bytes": -1024,
            "Total Allocated": 0,
            "Total Reserved": 2097152,
        },
    ),
    memory(95, {"Device Type": 0, "Device Id": -1, "Bytes": 16}),
    memory(96, {"Bytes": 1}, name="[not memory]"),
]


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory):
    path = write_trace(tmp_path_factory.mktemp("ops") / "r.json", EVENTS, base_time_ns=BASE)
    fast = parse_trace(path)
    slow = parse_trace(path, scanner=False)
    for name in ("events", "ops", "op_launches", "memory_events"):
        assert getattr(fast, name).equals(getattr(slow, name)), name
    if available():
        assert fast.meta.decoder == "scanner"
    return fast


def test_tree_parents_and_depths(parsed) -> None:
    ops = {r["op_id"]: r for r in parsed.ops.iter_rows(named=True)}
    assert sorted(ops) == [
        0,
        1,
        2,
        5,
        6,
        9,
        10,
        11,
        16,
        17,
        18,
        19,
        20,
    ]  # runtime calls and GPU events are not ops
    parent = {i: r["parent_id"] for i, r in ops.items()}
    assert parent == {
        0: None,
        1: 0,
        2: 1,
        5: 0,
        6: 5,
        9: None,
        10: None,
        11: 10,
        16: None,
        17: None,
        18: 17,
        19: None,
        20: 19,
    }
    depth = {i: r["depth"] for i, r in ops.items()}
    assert depth == {0: 0, 1: 1, 2: 2, 5: 1, 6: 2, 9: 0, 10: 0, 11: 1, 16: 0, 17: 0, 18: 1, 19: 0, 20: 1}
    assert (
        ops[1]["kind"] == "cpu_op"
        and ops[0]["kind"] == "python_function"
        and ops[9]["kind"] == "user_annotation"
    )
    assert ops[2]["ts_unix_ns"] == BASE + 15_000 and ops[2]["dur_ns"] == 40_000


def test_args_as_written(parsed) -> None:
    linear = parsed.ops.filter(pl.col("op_id") == 1).row(0, named=True)
    assert linear["input_dims"] == "[[2,3],[4,3]]"
    assert linear["input_types"] == '["float","float"]'
    assert linear["concrete_inputs"] == '["",""]'
    assert (linear["sequence_number"], linear["fwd_thread_id"]) == (5, 0)
    bwd = parsed.ops.filter(pl.col("op_id") == 10).row(0, named=True)
    assert (bwd["sequence_number"], bwd["fwd_thread_id"], bwd["input_dims"]) == (6, 1, None)
    assert parsed.ops.filter(pl.col("op_id") == 6)["external_id"].to_list() == [77]


def test_module_paths(parsed) -> None:
    module = dict(parsed.ops.select("op_id", "module").iter_rows())
    assert module[0] == "Net_0" and module[1] == "Net_0" and module[2] == "Net_0"
    assert module[5] == "Net_0/Linear_1" and module[6] == "Net_0/Linear_1"
    assert module[9] is None and module[11] is None and module[18] is None


def test_kernel_to_op_and_backward_to_forward(parsed) -> None:
    rows = {r["event_id"]: r for r in parsed.op_launches.iter_rows(named=True)}
    assert sorted(rows) == [4, 8, 13, 14, 15]
    links = {i: (r["op_id"], r["fwd_op_id"], r["module"]) for i, r in rows.items()}
    assert links == {
        4: (2, None, "Net_0"),  # innermost cpu_op around its launch: aten::addmm, not aten::linear
        8: (6, None, "Net_0/Linear_1"),
        13: (11, 2, "Net_0"),  # aten::mm under AddmmBackward0 (seq 6): forward aten::addmm, its module
        14: (6, None, "Net_0/Linear_1"),  # no correlation: External id 77
        15: (None, None, None),
    }
    assert rows[14]["kind"] == "memcpy" and rows[4]["correlation"] == 1 and rows[4]["stream"] == 7
    assert rows[4]["ts_unix_ns"] == BASE + 30_000


def test_memory_events(parsed) -> None:
    mem = parsed.memory_events
    assert mem["ts_unix_ns"].to_list() == [BASE + 50_000, BASE + 90_500, BASE + 95_000]
    assert mem["bytes"].to_list() == [1024, -1024, 16]
    assert mem["addr"].to_list() == [140000, 140000, None]
    assert mem["total_allocated"].to_list() == [1024, 0, None]
    assert mem["total_reserved"].to_list() == [2097152, 2097152, None]
    assert mem["device_type"].to_list() == [1, 1, 0] and mem["device"].to_list() == [0, 0, -1]
    assert mem["pid"].to_list() == ["100"] * 3


@pytest.mark.parametrize("scanner", [True, False])
def test_memory_args_out_of_range_are_null(tmp_path: Path, scanner: bool) -> None:
    """A memory arg that is no int64 integer (beyond double range, a float, text) is NULL, the row kept."""
    odd = {"Device Type": 1, "Device Id": 7, "Bytes": 2**63, "Addr": 1.5, "Total Allocated": "9"}
    events = [kernel("k", 1, 1, correlation=5), memory(2, odd)]
    path = write_trace(tmp_path / "m.json", events, base_time_ns=BASE)
    text = path.read_bytes()
    assert text.count(b'"Device Id":7') == 1
    path.write_bytes(text.replace(b'"Device Id":7', b'"Device Id":1e400'))
    mem = parse_trace(path, scanner=scanner).memory_events
    assert mem.select("device_type", "device", "bytes", "addr", "total_allocated").rows() == [
        (1, None, None, None, None)
    ]


def test_trace_without_ops_or_memory(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "k.json", [kernel("k", 1, 1, correlation=5)], base_time_ns=BASE)
    parsed = parse_trace(path)
    assert parsed.ops.height == 0 and parsed.memory_events.height == 0
    assert parsed.op_launches.select("event_id", "op_id").rows() == [(0, None)]
