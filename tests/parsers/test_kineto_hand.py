"""parse_trace on tracebuilder-made traces: each rule of the parser, with hand-computed values."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import polars as pl
from support.tracebuilder import (
    annotation,
    cpu_op,
    distributed,
    flow,
    gloo,
    kernel,
    label,
    pg,
    process_name,
    runtime,
    step,
    thread_name,
    write_trace,
)
from tracehouse.pipeline.parsers.kineto.parse import parse_trace

BASE = 1_700_000_000_000_000_000


def test_relative_ts_adds_base_time(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "r.json", [cpu_op("a", 12.345, 0.5), cpu_op("b", 7, 3)], base_time_ns=BASE)
    ev = parse_trace(path).events
    assert ev["ts_unix_ns"].to_list() == [BASE + 12345, BASE + 7000]
    assert ev["dur_ns"].to_list() == [500, 3000]


def test_absolute_int_and_float_epoch_ts(tmp_path: Path) -> None:
    ints = parse_trace(write_trace(tmp_path / "i.json", [cpu_op("a", 1712195495519689, 2)]))
    assert ints.events["ts_unix_ns"].to_list() == [1712195495519689000]
    assert ints.meta.ts_origin == "absolute-epoch"
    exact = [
        cpu_op("a", Decimal("1712195495519689.047"), Decimal("0.125")),
        cpu_op("b", Decimal("1712195495519695.812"), 3),
    ]
    floats = parse_trace(write_trace(tmp_path / "f.json", exact, gz=True))
    assert floats.events["ts_unix_ns"].to_list() == [1712195495519689047, 1712195495519695812]
    assert floats.events["dur_ns"].to_list() == [125, 3000]


def test_negative_durations_are_dropped_and_counted(tmp_path: Path) -> None:
    events = [cpu_op("ok", 1, 2), cpu_op("bad", 2, -1), kernel("k", 3, -0.5), cpu_op("zero", 4, 0)]
    parsed = parse_trace(write_trace(tmp_path / "n.json", events, base_time_ns=0))
    assert parsed.events["name"].to_list() == ["ok", "zero"]
    assert parsed.meta.negative_dur_events == 2


def test_launch_ts_is_the_earliest_runtime_with_the_correlation(tmp_path: Path) -> None:
    events = [
        runtime("cudaLaunchKernel", 50, 2, correlation=1),
        runtime("cuLaunchKernel", 40, 1, correlation=1, cat="cuda_driver"),  # earlier: wins
        cpu_op("aten::mm", 30, 30, args={"correlation": 1}),  # not a runtime event
        runtime("cudaMemcpyAsync", 60, 1, correlation=2, cat="Runtime"),
        kernel("gemm", 100, 10, correlation=1),
        kernel("copy", 110, 5, correlation=2, cat="Memcpy"),
        kernel("orphan", 120, 5, correlation=3),  # launched before profiling
        kernel("no_stream", 130, 5, correlation=1, stream="0x0"),  # not a GPU event
    ]
    ev = parse_trace(write_trace(tmp_path / "l.json", events, base_time_ns=0)).events
    launch = dict(zip(ev["name"], ev["launch_ts_unix_ns"], strict=True))
    assert launch == {
        "cudaLaunchKernel": None,
        "cuLaunchKernel": None,
        "aten::mm": None,
        "cudaMemcpyAsync": None,
        "gemm": 40_000,
        "copy": 60_000,
        "orphan": None,
        "no_stream": None,
    }
    assert dict(zip(ev["name"], ev["kind"], strict=True))["copy"] == "memcpy"


def test_steps_come_from_the_loop_thread(tmp_path: Path) -> None:
    events = [
        step(3, 100, 50),
        step(4, 150, 60, cat="cpu_op"),
        step(3, 101, 10),  # duplicate #3: earliest kept
        step(9, 120, 5, tid=7),  # another thread with fewer steps
        kernel("ProfilerStep#3", 110, 40, cat="gpu_user_annotation"),
        annotation("ProfilerStep#x", 100, 1),
    ]
    steps = parse_trace(write_trace(tmp_path / "s.json", events, base_time_ns=0)).steps
    assert steps.rows() == [(3, 100_000, 50_000, "100", "100"), (4, 150_000, 60_000, "100", "100")]


def test_threads_pid_tid_as_text_and_last_thread_name_wins(tmp_path: Path) -> None:
    events = [
        cpu_op("a", 1, 1),
        process_name(100, "python"),
        thread_name(100, 100, "main"),
        thread_name(100, 5, "first"),
        thread_name(100, 5, "renamed"),
        process_name("Spans", "x"),
        flow(1, id=1, start=True),
    ]
    threads = parse_trace(write_trace(tmp_path / "t.json", events)).threads.sort("pid", "tid")
    assert threads.rows() == [
        ("100", "100", "main", "python"),
        ("100", "5", "renamed", "python"),
        ("Spans", "0", None, "x"),
    ]


def test_kernel_bytes_follow_nccl_tests_convention(tmp_path: Path) -> None:
    def comm(op: str, n_in: int, n_out: int, corr: int, t: int) -> list[dict]:
        args = {
            "Collective name": op,
            "In msg nelems": n_in,
            "Out msg nelems": n_out,
            "Group size": 4,
            "dtype": "BFloat16",
            "Process Group Name": "7",
            "Process Group Description": "tp",
        }
        return [
            runtime("cudaLaunchKernel", t, 1, correlation=corr),
            kernel(f"ncclDevKernel_{op}", t + 5, 10, correlation=corr, args=args),
        ]

    events = (
        comm("allreduce", 100, 100, 1, 10)
        + comm("all_gather_into_tensor", 25, 100, 2, 30)
        + comm("reduce_scatter_tensor", 100, 25, 3, 50)
    )
    coll = parse_trace(write_trace(tmp_path / "k.json", events, base_time_ns=0)).collectives
    assert coll.select("op", "bytes", "dtype", "group_size", "process_group", "pg_desc").rows() == [
        ("all_reduce", 200, "bfloat16", 4, "7", "tp"),
        ("all_gather", 200, "bfloat16", 4, "7", "tp"),
        ("reduce_scatter", 200, "bfloat16", 4, "7", "tp"),
    ]


def test_kernel_bytes_beyond_int64_are_null_not_wrapped(tmp_path: Path) -> None:
    args = {"Collective name": "allreduce", "In msg nelems": 2**62, "Out msg nelems": 2**62, "dtype": "Float"}
    events = [
        runtime("cudaLaunchKernel", 10, 1, correlation=1),
        kernel("ncclDevKernel_AllReduce", 15, 10, correlation=1, args=args),
    ]
    coll = parse_trace(write_trace(tmp_path / "k.json", events, base_time_ns=0)).collectives
    # 2**62 elements x 4 bytes = 2**64: no Int64 holds it, and a wrapped value would look real
    assert coll.select("op", "bytes", "dtype").rows() == [("all_reduce", None, "float32")]


def test_kernel_without_args_uses_record_param_comms_around_its_launch(tmp_path: Path) -> None:
    rpc = {
        "Collective name": "allgather",
        "In msg nelems": 10,
        "Out msg nelems": 80,
        "Group size": 8,
        "dtype": "Float",
        "Process Group Name": "2",
        "Seq": 17,
    }
    events = [
        cpu_op("record_param_comms", 100, 20, args=rpc),
        runtime("cudaLaunchKernel", 110, 2, correlation=9),
        kernel("ncclKernel_AllGather_RING_LL_Sum_float", 200, 30, correlation=9),
        runtime("cudaLaunchKernel", 300, 2, correlation=10),  # outside any record_param_comms
        kernel("ncclKernel_SendRecv_RING_SIMPLE", 400, 30, correlation=10),
    ]
    coll = parse_trace(write_trace(tmp_path / "r.json", events, base_time_ns=0)).collectives
    assert coll.select("op", "bytes", "seq", "process_group", "ts_unix_ns", "dur_ns", "source").rows() == [
        ("all_gather", 320, 17, "2", 200_000, 30_000, "nccl_kernel"),
        ("send_recv", None, None, None, 400_000, 30_000, "nccl_kernel"),
    ]


def test_gloo_spans_attributed_to_labels(tmp_path: Path) -> None:
    groups = [pg("0", 2), pg("1", 2, desc="tp")]
    events = [
        label(100, 50, op="all_reduce", bytes=4000, pg="1", pg_desc="tp", seq=0),
        label(200, 50, op="all_reduce", bytes=4000, pg="1", pg_desc="tp", seq=1),
        label(300, 50, op="all_gather", bytes=80, pg="0", seq=0),
        label(400, 50, op="reduce_scatter", bytes=64, pg="0", seq=1),
        label(500, 10, op="all_to_all", bytes=48, pg="0", seq=2),  # gloo never names it here
        gloo("all_reduce", 110, 30, numel=1000, tid=901),
        gloo("all_reduce", 210, 30, numel=1000, tid=902),
        gloo("all_gather", 310, 30, numel=10, tid=901),  # 10 floats in, 2 ranks: 80 B
        gloo("all_reduce", 410, 30, numel=16, tid=902),  # reduce_scatter runs as all_reduce
        gloo("all_reduce", 600, 30, numel=262912, tid=901),  # DDP bucket: no label
        gloo("barrier", 700, 5, tid=902),
    ]
    info = distributed(0, 2, backend="gloo", groups=groups)
    coll = parse_trace(
        write_trace(tmp_path / "g.json", events, base_time_ns=0, distributed_info=info)
    ).collectives
    assert coll.select(
        "op", "process_group", "seq", "bytes", "dtype", "group_size", "ts_unix_ns", "source", "tid"
    ).rows() == [
        ("all_reduce", "1", 0, 4000, "float32", 2, 110_000, "gloo", "901"),
        ("all_reduce", "1", 1, 4000, "float32", 2, 210_000, "gloo", "902"),
        ("all_gather", "0", 0, 80, "float32", 2, 310_000, "gloo", "901"),
        ("reduce_scatter", "0", 1, 64, "float32", 2, 410_000, "gloo", "902"),
        ("all_to_all", "0", 2, 48, "float32", 2, 500_000, "label", "100"),
        ("all_reduce", None, None, 262912 * 4, "float32", None, 600_000, "gloo", "901"),
        ("barrier", None, None, 0, None, None, 700_000, "gloo", "902"),
    ]


def test_gloo_single_group_and_enclosing_c10d_op(tmp_path: Path) -> None:
    events = [
        cpu_op("c10d::send", 100, 40, tid=100, args={"Input Dims": [[7]], "Input type": ["float"]}),
        annotation("gloo:send", 110, 20, tid=100),  # no shapes of its own
        gloo("all_gather", 200, 10, numel=16, dtype="c10::BFloat16"),
    ]
    info = distributed(0, 2, backend="gloo", groups=[pg("0", 2)])
    coll = parse_trace(
        write_trace(tmp_path / "c.json", events, base_time_ns=0, distributed_info=info)
    ).collectives
    assert coll.select("op", "bytes", "dtype", "group_size", "process_group").rows() == [
        ("send", 28, "float32", 2, "0"),
        ("all_gather", 64, "bfloat16", 2, "0"),
    ]


def test_bare_array_and_string_pids(tmp_path: Path) -> None:
    events = [cpu_op("a", 5, 1, pid="host", tid="stream 7"), cpu_op("b", 6, 1, pid=3, tid=4)]
    parsed = parse_trace(write_trace(tmp_path / "b.json", events, bare_array=True))
    assert parsed.meta.layout == "bare-array"
    assert parsed.events.select("pid", "tid").rows() == [("host", "stream 7"), ("3", "4")]
    assert parsed.events.filter(pl.col("name") == "a")["ts_unix_ns"][0] == 5000
