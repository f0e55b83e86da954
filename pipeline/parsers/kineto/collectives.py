"""COLLECTIVES: one row per collective call per rank, as the trace shows it.

Sources, in this order of preference:
* `nccl_kernel` (GPU traces): one row per communication kernel (names starting
  nccl/rccl/hccl, or containing ncclKernel/ncclDevKernel, case-insensitive); ts/dur of the
  kernel. Fields come from the kernel's own args (newer traces put `Collective name`,
  `In/Out msg nelems`, `Group size`, `dtype`, `Process Group Name/Description` there), else
  from the `record_param_comms` op whose span contains the kernel's LAUNCH (the earliest
  runtime call with the kernel's correlation, on the launching thread), else from the
  `nccl:*` annotation containing that launch (op from its name, size from its `Input Dims`),
  else the op is read from the kernel name (SendRecv -> "send_recv"; Generic -> NULL).
  The launch rule is used rather than `External id` because sampled traces renumber
  External ids while the launch still sits inside the op's span.
* `cpu_annotation`: a trace with no communication kernel but host `nccl:*` annotations gets
  one row per annotation (ts/dur of the annotation), fields from the enclosing
  `record_param_comms` and the annotation's `Input Dims`.
* `gloo` / `label` (CPU traces): see `gloo`.

bytes follow the nccl-tests "size" convention: `max(in_nelems, out_nelems) × dtype size`,
i.e. all_reduce/broadcast/reduce/send/recv: the buffer; all_gather: the total OUTPUT;
reduce_scatter: the total INPUT; all_to_all: the total sent. When only a host tensor shape
is known (`Input Dims` of one input), all_gather multiplies it by the group size (NULL when
unknown). `seq`: args `Seq` of the kernel or of `record_param_comms`, else NULL (an op's
`Sequence number` is autograd's, not the collective's). process_group/pg_desc/group_size fall
back to the single group of `distributedInfo.pg_config` when there is exactly one.

A trace holds tens to thousands of communication events, so the rows are built in plain
Python over them: as two dozen small Polars queries, this cost more than all of a small
trace's parse after the scan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
from tracehouse.pipeline.common.comm_names import dtype_name, dtype_size, kernel_op, op_name
from tracehouse.pipeline.common.comm_vocabulary import NCCL_ANNOTATION_PREFIX, RECORD_PARAM_COMMS
from tracehouse.pipeline.parsers.kineto.events import RUNTIME_KIND, int64_or_none
from tracehouse.pipeline.parsers.kineto.gloo import gloo_rows
from tracehouse.pipeline.parsers.kineto.meta import TopLevel
from tracehouse.pipeline.parsers.kineto.names import is_comm_kernel
from tracehouse.pipeline.parsers.kineto.spans import holders
from tracehouse.pipeline.schema import COLLECTIVES

HOST_KINDS = ("cpu_op", "user_annotation", "other", "python_function")
NO_LAUNCH = -(2**62)  # the place of a kernel with no runtime call: before everything

# One event of the communication frame (`_comm`): EVENTS columns plus COMM_ARGS.
Event = dict[str, Any]
# Where an event's host context is looked up: (time, pid, tid).
Place = tuple[int, str | None, str | None]
NOWHERE: Event = {}


def _comm(full: pl.DataFrame, comm_args: pl.DataFrame) -> pl.DataFrame:
    """The candidate events (`_comm`) with their comm args."""
    comm = full.filter(pl.col("_comm")).drop("_comm", "_step")
    return comm.join(comm_args, on="_row", how="inner", maintain_order="left")


def _launches(full: pl.DataFrame, kernels: list[Event]) -> list[Place]:
    """Each kernel's earliest runtime call with its correlation (ts, pid, tid); NO_LAUNCH if none."""
    correlations = [k["correlation"] for k in kernels if k["correlation"] is not None]
    linked = full.filter(pl.col("correlation").is_in(correlations))  # the kernels and their calls
    first: dict[int, Place] = {}
    for kind, corr, ts, pid, tid in linked.select(
        "kind", "correlation", "ts_unix_ns", "pid", "tid"
    ).iter_rows():
        if kind == RUNTIME_KIND and (corr not in first or ts < first[corr][0]):
            first[corr] = (ts, pid, tid)
    return [first.get(k["correlation"], (NO_LAUNCH, None, None)) for k in kernels]


def _holding(places: list[Place], outer: list[Event]) -> list[Event]:
    """Per place, the outer event on its thread whose span holds its time (`spans.holders`)."""
    if not outer:
        return [NOWHERE] * len(places)
    start = np.array([e["ts_unix_ns"] for e in outer], dtype=np.int64)
    found = holders(
        [(pid, tid) for _, pid, tid in places],
        np.array([at for at, _, _ in places], dtype=np.int64),
        [(e["pid"], e["tid"]) for e in outer],
        start,
        start + np.array([e["dur_ns"] for e in outer], dtype=np.int64),
    )
    return [NOWHERE if i is None else outer[i] for i in found.tolist(None)]


def _host(events: list[Event], is_name: Callable[[str], bool]) -> list[Event]:
    """The host-side events (ops, annotations) whose name passes `is_name`."""
    return [e for e in events if e["kind"] in HOST_KINDS and e["name"] is not None and is_name(e["name"])]


def _is_rpc(name: str) -> bool:
    return name == RECORD_PARAM_COMMS


def _is_annotation(name: str) -> bool:
    return name.startswith(NCCL_ANNOTATION_PREFIX)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _of(fn: Callable[[str], Any], value: str | None) -> Any:
    return None if value is None else fn(value)


def _fields(event: Event, rpc: Event, ann: Event, single: dict[str, Any], own: bool) -> tuple[Any, ...]:
    """(op, process_group, pg_desc, seq, bytes, dtype, group_size) of one communication event.

    Each field from the event's own args (when `own`), else its record_param_comms, else its
    `nccl:*` annotation (op, dtype, shape), else the single process group.
    """

    def pick(key: str) -> Any:
        return _first(event[key] if own else None, rpc.get(key))

    op = _first(
        _of(op_name, pick("collective_name")),
        _of(op_name, ann.get("name")),
        _of(kernel_op if own else op_name, event["name"]),
    )
    dtype = _of(dtype_name, _first(pick("dtype"), ann.get("input_type")))
    group_size = _first(pick("group_size"), single["group_size"])
    shape = ann.get("numel")
    if shape is not None and op == "all_gather":
        shape = None if group_size is None else shape * group_size
    sizes = [n for n in (pick("in_nelems"), pick("out_nelems")) if n is not None]
    nelems, width = _first(max(sizes, default=None), shape), _of(dtype_size, dtype)
    nbytes = None if nelems is None or width is None else nelems * width
    return (
        op,
        _first(pick("pg_name"), single["process_group"]),
        _first(pick("pg_desc"), single["pg_desc"]),
        # Only a collective's own sequence number: the ops' "Sequence number" arg is autograd's,
        # and a wrong seq would match instances confidently but wrongly (order matching is safe).
        pick("seq"),
        int64_or_none(nbytes),
        dtype,
        group_size,
    )


def _rows(
    events: list[Event], places: list[Place], comm: list[Event], top: TopLevel, *, own: bool
) -> list[tuple]:
    """COLLECTIVES rows of `events`, their host context looked up at `places`, in place order.

    `own` (communication kernels): fields from the event's own args first, and the `nccl:*`
    annotation holding the place; else (annotations) each event is its own annotation.
    """
    order = sorted(range(len(events)), key=lambda i: places[i][0])
    events, places = [events[i] for i in order], [places[i] for i in order]
    rpcs = _holding(places, _host(comm, _is_rpc))
    anns = _holding(places, _host(comm, _is_annotation)) if own else events
    source = "nccl_kernel" if own else "cpu_annotation"
    single = top.single_group
    return [
        (*_fields(e, rpc, ann, single, own), e["ts_unix_ns"], e["dur_ns"], source, e["name"], e["tid"])
        for e, rpc, ann in zip(events, rpcs, anns, strict=True)
    ]


def kernel_rows(full: pl.DataFrame, comm: list[Event], top: TopLevel) -> list[tuple]:
    """One row per communication kernel; its host context is where it was launched."""
    kernels = [
        e for e in comm if e["kind"] == "kernel" and e["name"] is not None and is_comm_kernel(e["name"])
    ]
    if not kernels:
        return []
    return _rows(kernels, _launches(full, kernels), comm, top, own=True)


def annotation_rows(comm: list[Event], top: TopLevel) -> list[tuple]:
    """One row per host `nccl:*` annotation (traces without communication kernels)."""
    annotations = _host(comm, _is_annotation)
    places = [(e["ts_unix_ns"], e["pid"], e["tid"]) for e in annotations]
    return _rows(annotations, places, comm, top, own=False)


def collectives_frame(full: pl.DataFrame, comm_args: pl.DataFrame, top: TopLevel) -> pl.DataFrame:
    """All COLLECTIVES rows of one rank trace, in start order."""
    if comm_args.is_empty():
        return pl.DataFrame(schema=COLLECTIVES)
    comm = _comm(full, comm_args)
    events = comm.to_dicts()
    rows = kernel_rows(full, events, top) or annotation_rows(events, top)
    frame = pl.DataFrame(rows, schema=COLLECTIVES, orient="row")
    gloo = gloo_rows(comm, top)
    if not gloo.is_empty():
        frame = pl.concat([frame, gloo], how="vertical")
    return frame.sort("ts_unix_ns", maintain_order=True)
