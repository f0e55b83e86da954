"""Write small hand-made Kineto chrome traces for tests.

    from support.tracebuilder import write_trace, cpu_op, runtime, kernel, step
    path = write_trace(tmp_path / "r0.json", [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5,
                       correlation=1), kernel("gemm", 20, 30, correlation=1)], base_time_ns=10**18)

`ts`/`dur` are µs exactly as Kineto writes them: an int, a float, or a `decimal.Decimal`
(written as a JSON number with every digit, for absolute-epoch float timestamps that a
float64 cannot hold). Events are plain dicts; pass extra `args` to any constructor.
"""

from __future__ import annotations

import gzip
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
from tracehouse.pipeline.common.comm_label import format_label

Number = int | float | Decimal
HOST_PID = 100
HOST_TID = 100
_ENCODER = msgspec.json.Encoder(decimal_format="number")


def _x(cat: str, name: str, ts: Number, dur: Number, pid: Any, tid: Any, args: dict | None) -> dict:
    event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        event["args"] = args
    return event


def cpu_op(
    name: str,
    ts: Number,
    dur: Number,
    *,
    pid: Any = HOST_PID,
    tid: Any = HOST_TID,
    cat: str = "cpu_op",
    args: dict | None = None,
) -> dict:
    """A host op (`cpu_op`; pass cat="Operator" for the 2020-2021 spelling)."""
    return _x(cat, name, ts, dur, pid, tid, args)


def annotation(
    name: str, ts: Number, dur: Number, *, pid: Any = HOST_PID, tid: Any = HOST_TID, args: dict | None = None
) -> dict:
    """A `user_annotation` (record_function) span."""
    return _x("user_annotation", name, ts, dur, pid, tid, args)


def step(
    n: int, ts: Number, dur: Number, *, pid: Any = HOST_PID, tid: Any = HOST_TID, cat: str = "user_annotation"
) -> dict:
    """A `ProfilerStep#n` annotation."""
    return _x(cat, f"ProfilerStep#{n}", ts, dur, pid, tid, None)


def runtime(
    name: str,
    ts: Number,
    dur: Number,
    *,
    correlation: int,
    pid: Any = HOST_PID,
    tid: Any = HOST_TID,
    cat: str = "cuda_runtime",
    args: dict | None = None,
) -> dict:
    """A launch-side runtime/driver call (`cuda_runtime`, `cuda_driver` or legacy `Runtime`)."""
    return _x(cat, name, ts, dur, pid, tid, {"correlation": correlation, **(args or {})})


def kernel(
    name: str,
    ts: Number,
    dur: Number,
    *,
    correlation: int | None = None,
    stream: Any = 7,
    device: int = 0,
    cat: str = "kernel",
    args: dict | None = None,
) -> dict:
    """A GPU event on `pid=device`, `tid=stream` (cat "gpu_memcpy"/"gpu_memset" for memory)."""
    base = {"device": device, "stream": stream}
    if correlation is not None:
        base["correlation"] = correlation
    return _x(cat, name, ts, dur, device, stream, {**base, **(args or {})})


def gloo(
    op: str,
    ts: Number,
    dur: Number,
    *,
    numel: int | None = None,
    dtype: str = "float",
    pid: Any = HOST_PID,
    tid: Any = 900,
) -> dict:
    """A `gloo:<op>` span as gloo's runloop thread records it (Input Dims [[numel]])."""
    args = {"Input Dims": [[numel]], "Input type": [dtype]} if numel is not None else None
    return _x("user_annotation", f"gloo:{op}", ts, dur, pid, tid, args)


def label(
    ts: Number,
    dur: Number,
    *,
    op: str,
    bytes: int,
    pg: str = "0",
    pg_desc: str = "default_pg",
    seq: int = 0,
    dtype: str = "float32",
    group_size: int = 2,
    pid: Any = HOST_PID,
    tid: Any = HOST_TID,
) -> dict:
    """A tracehouse collective label span (`pipeline.comm_label`)."""
    name = format_label(
        op=op, pg=pg, pg_desc=pg_desc, seq=seq, bytes=bytes, dtype=dtype, group_size=group_size
    )
    return _x("user_annotation", name, ts, dur, pid, tid, None)


def thread_name(pid: Any, tid: Any, name: str) -> dict:
    """An `M` event naming a thread."""
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def process_name(pid: Any, name: str) -> dict:
    """An `M` event naming a process."""
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def flow(ts: Number, *, id: int, start: bool, pid: Any = HOST_PID, tid: Any = HOST_TID) -> dict:
    """An `ac2g` flow start (s) or finish (f) event; the parser skips these."""
    return {
        "ph": "s" if start else "f",
        "id": id,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "cat": "ac2g",
        "name": "ac2g",
    }


def distributed(
    rank: int, world_size: int, *, backend: str = "nccl", groups: list[dict] | None = None
) -> dict:
    """A `distributedInfo` object; `groups` are pg_config entries."""
    info: dict[str, Any] = {"backend": backend, "rank": rank, "world_size": world_size}
    if groups is not None:
        info["pg_count"] = len(groups)
        info["pg_config"] = groups
    return info


def pg(name: str, size: int, *, desc: str = "default_pg", ranks: list[int] | None = None) -> dict:
    """One pg_config entry."""
    return {
        "pg_name": name,
        "pg_desc": desc,
        "backend_config": "cpu:gloo",
        "pg_size": size,
        "ranks": ranks if ranks is not None else list(range(size)),
    }


def write_trace(
    path: str | Path,
    events: list[dict],
    *,
    base_time_ns: int | None = None,
    distributed_info: dict | None = None,
    gz: bool = False,
    bare_array: bool = False,
    device_names: tuple[str, ...] = (),
    top: dict | None = None,
) -> Path:
    """Write events as a Kineto trace (object with traceEvents, or a bare array); returns the path."""
    path = Path(path)
    if bare_array:
        document: Any = events
    else:
        document = {"schemaVersion": 1, **(top or {})}
        if device_names:
            document["deviceProperties"] = [{"id": i, "name": n} for i, n in enumerate(device_names)]
        if distributed_info is not None:
            document["distributedInfo"] = distributed_info
        if base_time_ns is not None:
            document["baseTimeNanoseconds"] = base_time_ns
        document["traceEvents"] = events
    data = _ENCODER.encode(document)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path
