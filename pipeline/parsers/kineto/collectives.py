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

A trace holds tens to thousands of communication events, and a Polars query costs ~0.1 ms
whatever its size: Polars does only what reads the whole trace (the candidates, the runtime
calls with the kernels' correlations); the rows are combined column-wise with pyarrow.compute
and numpy (microseconds a call), names and dtypes are read once per distinct value
(`commargs.per_distinct`), host context is found by `spans.holders`, and bytes are multiplied
as Python integers in numpy object arrays, so that a size beyond int64 is NULL exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from tracehouse.pipeline.common.comm_names import dtype_name, dtype_size, kernel_op, op_name
from tracehouse.pipeline.common.comm_vocabulary import NCCL_ANNOTATION_PREFIX, RECORD_PARAM_COMMS
from tracehouse.pipeline.parsers.kineto import arrow
from tracehouse.pipeline.parsers.kineto.commargs import COMM_ARGS, per_distinct
from tracehouse.pipeline.parsers.kineto.events import RUNTIME_KIND
from tracehouse.pipeline.parsers.kineto.gloo import gloo_rows
from tracehouse.pipeline.parsers.kineto.limits import INT64_MAX, INT64_MIN
from tracehouse.pipeline.parsers.kineto.meta import TopLevel
from tracehouse.pipeline.parsers.kineto.names import is_comm_kernel
from tracehouse.pipeline.parsers.kineto.spans import holders
from tracehouse.pipeline.warehouse.schema import COLLECTIVES

HOST_KINDS = ("cpu_op", "user_annotation", "other", "python_function")
NO_LAUNCH = -(2**62)  # the place of a kernel with no runtime call: before everything
EVENT_COLUMNS = ("_row", "kind", "name", "ts_unix_ns", "dur_ns", "pid", "tid", "correlation")
# Columns of one set of events: EVENT_COLUMNS, COMM_ARGS and what `_comm` derives, by name.
Columns = dict[str, Any]


def _width(text: str) -> int | None:
    """Bytes per element of a dtype spelling (None when unknown)."""
    dtype = dtype_name(text)
    return None if dtype is None else dtype_size(dtype)


_TEXT = pa.large_string()
# What the rules read from names and dtypes: source column -> {output: (fn, type)}.
DERIVED: dict[str, dict[str, tuple[Callable[[Any], Any], pa.DataType]]] = {
    "name": {
        "name_op": (op_name, _TEXT),
        "kernel_op": (kernel_op, _TEXT),
        "is_comm_kernel": (is_comm_kernel, pa.bool_()),
    },
    "collective_name": {"collective_op": (op_name, _TEXT)},
    "dtype": {"dtype_name": (dtype_name, _TEXT), "dtype_bytes": (_width, pa.int64())},
    "input_type": {"input_dtype": (dtype_name, _TEXT), "input_bytes": (_width, pa.int64())},
}
# The columns read from the record_param_comms op and from the `nccl:*` annotation of an event.
RPC = (
    "collective_name", "collective_op", "in_nelems", "out_nelems", "group_size", "dtype", "dtype_name",
    "dtype_bytes", "pg_name", "pg_desc", "seq",
)  # fmt: skip
ANN = ("name_op", "input_type", "input_dtype", "input_bytes", "numel")
OWN = (*RPC, "kernel_op")  # what a communication kernel reads from its own args
OUT = ("ts_unix_ns", "dur_ns", "name", "tid")  # what a row keeps of its event
# Per event, where its host context is looked up: times, and pids and tids (Python objects).
Place = tuple[np.ndarray, np.ndarray, np.ndarray]


def _lookup(keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in `keys` of each wanted key, whether it is there); `keys` are distinct."""
    if keys.size == 0:
        return np.zeros(wanted.size, dtype=np.int64), np.zeros(wanted.size, dtype=bool)
    order = np.argsort(keys, kind="stable")
    pos = np.minimum(np.searchsorted(keys[order], wanted), keys.size - 1)
    return order[pos], keys[order[pos]] == wanted


def _columns(frame: pl.DataFrame, keep: pl.Series, columns: tuple[str, ...]) -> dict[str, Any]:
    """`columns` of the rows of `frame` where `keep`, as arrow arrays (Series filters: no query)."""
    return {c: frame[c].filter(keep).to_arrow() for c in columns}


def _comm(full: pl.DataFrame, comm_args: pl.DataFrame) -> pa.Table:
    """The candidate events (`_comm`) with their comm args (by `_row`) and what their names and dtypes say."""
    events = _columns(full, full["_comm"], EVENT_COLUMNS)
    args = pa.table({c: comm_args[c].to_arrow() for c in COMM_ARGS})
    rows, arg_rows = arrow.numpy(events["_row"]), arrow.numpy(args["_row"])
    if not np.array_equal(rows, arg_rows):  # as an inner join (dropped events, unsorted args)
        at, found = _lookup(arg_rows, rows)
        keep = arrow.bools(found)
        events, args = {c: v.filter(keep) for c, v in events.items()}, args.take(arrow.int64s(at[found]))
    table = pa.table({**events, **{c: args[c] for c in COMM_ARGS if c != "_row"}})
    for source, derived in DERIVED.items():
        for name, values in per_distinct(table[source], derived).items():
            table = table.append_column(name, values)
    return table


def _take(table: pa.Table, rows: np.ndarray, found: np.ndarray) -> Columns:
    """The given rows of `table`, NULL where `found` is False."""
    taken = table.take(arrow.int64s(rows, found))
    return dict(zip(taken.column_names, taken.columns, strict=True))


def _mask(values: Any) -> np.ndarray:
    """A boolean array as numpy, NULL as False."""
    return arrow.numpy(pc.fill_null(values, arrow.scalar(False, pa.bool_())))


def _equal(values: Any, text: str) -> np.ndarray:
    """Which values equal `text`, as numpy (NULL as False)."""
    return _mask(pc.equal(values, arrow.scalar(text, values.type)))


def _host(table: pa.Table) -> np.ndarray:
    """Which rows are host-side events (ops, annotations)."""
    return _mask(pc.is_in(table["kind"], value_set=arrow.array(HOST_KINDS, table["kind"].type)))


def _objects(values: Any) -> np.ndarray:
    """An arrow array as a numpy array of Python objects (NULL as None)."""
    return np.array(values.to_pylist(), dtype=object)


def _holding(
    place: Place, table: pa.Table, outer: np.ndarray, columns: tuple[str, ...], prefix: str
) -> Columns:
    """Per place, `columns` of the outer event (of the rows `outer` of `table`) holding it.

    The outer event is on the place's thread and its span holds the place's time (the rule of
    `spans.holders`); NULL where none does.
    """
    at, pids, tids = place
    if outer.size == 0:
        return {prefix + c: pa.nulls(at.size, type=table[c].type) for c in columns}
    start = arrow.numpy(table["ts_unix_ns"])[outer]
    rows = arrow.int64s(outer)
    found = holders(
        zip(pids, tids, strict=True),
        at,
        zip(pc.take(table["pid"], rows).to_pylist(), pc.take(table["tid"], rows).to_pylist(), strict=True),
        start,
        start + arrow.numpy(table["dur_ns"])[outer],
    )
    held = _take(table.select(columns), outer[found.filled(0)], ~np.ma.getmaskarray(found))
    return {prefix + c: v for c, v in held.items()}


def _first(cols: Columns, *choices: tuple[str, str]) -> Any:
    """`derived` of the first (raw, derived) column pair whose raw value is not NULL."""
    *rest, (_, last) = choices
    value = cols[last]  # NULL wherever its raw value is
    for raw, derived in reversed(rest):
        value = pc.if_else(pc.is_valid(cols[raw]), cols[derived], value)
    return value


def _integers(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """(Python integers as a numpy object array, NULL as 0; where the value is not NULL)."""
    zero = arrow.scalar(0, values.type)
    return np.array(pc.fill_null(values, zero).to_pylist(), dtype=object), _mask(pc.is_valid(values))


def _bytes(op: Any, group_size: Any, nelems: Any, shape: Any, width: Any) -> pa.Array:
    """nelems, else the annotation's shape (× group size for all_gather), × dtype width.

    Multiplied as Python integers (numpy object arrays), so that a product beyond int64 is NULL
    exactly, whatever the sizes.
    """
    all_gather = _equal(op, "all_gather")
    (n, has_n), (s, has_s), (g, has_g), (w, has_w) = map(_integers, (nelems, shape, group_size, width))
    s, has_s = np.where(all_gather, s * g, s), np.where(all_gather, has_s & has_g, has_s)
    n, has_n = np.where(has_n, n, s), has_n | has_s
    nbytes = n * w
    fits = has_n & has_w & (nbytes >= INT64_MIN) & (nbytes <= INT64_MAX)
    return arrow.int64s(np.where(fits, nbytes, 0), fits)


def _fields(cols: Columns, single: dict[str, Any], own: bool) -> Columns:
    """op, process_group, pg_desc, seq, bytes, dtype, group_size of each communication event.

    Each field from the event's own args (when `own`), else its record_param_comms (`rpc_*`),
    else its `nccl:*` annotation (`ann_*`: op, dtype, shape), else the single process group.
    """
    sources = ("", "rpc_") if own else ("rpc_",)

    def pick(key: str, default: Any = None) -> Any:
        values = [cols[s + key] for s in sources]
        if default is not None:
            values.append(arrow.scalar(default, values[0].type))
        return pc.coalesce(*values) if len(values) > 1 else values[0]

    def first_of(raw: str, derived: str) -> list[tuple[str, str]]:
        return [(s + raw, s + derived) for s in sources]

    op = pc.coalesce(
        _first(cols, *first_of("collective_name", "collective_op")),
        cols["ann_name_op"],
        cols["kernel_op" if own else "name_op"],
    )
    group_size = pick("group_size", single["group_size"])
    nelems = pc.max_element_wise(pick("in_nelems"), pick("out_nelems"), skip_nulls=True)
    width = _first(cols, *first_of("dtype", "dtype_bytes"), ("ann_input_type", "ann_input_bytes"))
    return {
        "op": op,
        "process_group": pick("pg_name", single["process_group"]),
        "pg_desc": pick("pg_desc", single["pg_desc"]),
        # Only a collective's own sequence number: the ops' "Sequence number" arg is autograd's,
        # and a wrong seq would match instances confidently but wrongly (order matching is safe).
        "seq": pick("seq"),
        "bytes": _bytes(op, group_size, nelems, cols["ann_numel"], width),
        "dtype": _first(cols, *first_of("dtype", "dtype_name"), ("ann_input_type", "ann_input_dtype")),
        "group_size": group_size,
    }


def _rows(rows: np.ndarray, place: Place, table: pa.Table, top: TopLevel, *, own: bool) -> pl.DataFrame:
    """COLLECTIVES rows of the events `rows` of `table`, host context looked up at `place`, in place order.

    `own` (communication kernels): fields from the event's own args first, and the `nccl:*`
    annotation holding the place; else (annotations) each event is its own annotation.
    """
    order = np.argsort(place[0], kind="stable")
    rows, place = rows[order], (place[0][order], place[1][order], place[2][order])
    name, host = table["name"], _host(table)
    rpc_rows = np.flatnonzero(host & _equal(name, RECORD_PARAM_COMMS))
    rpcs = _holding(place, table, rpc_rows, RPC, "rpc_")
    events = table.select([*(OWN if own else ANN), *OUT]).take(arrow.int64s(rows))
    if own:
        annotations = np.flatnonzero(host & _mask(pc.starts_with(name, NCCL_ANNOTATION_PREFIX)))
        anns = _holding(place, table, annotations, ANN, "ann_")
    else:
        anns = {"ann_" + c: events[c] for c in ANN}
    cols = {**dict(zip(events.column_names, events.columns, strict=True)), **rpcs, **anns}
    source = ["nccl_kernel" if own else "cpu_annotation"] * rows.size
    columns = {**_fields(cols, top.single_group, own), "source": source}
    return pl.DataFrame(
        [pl.Series(c, columns[c] if c in columns else cols[c]).cast(t) for c, t in COLLECTIVES.items()]
    )


def _launches(full: pl.DataFrame, table: pa.Table, kernels: np.ndarray) -> Place:
    """Where each kernel (rows of `table`) was launched: its earliest runtime call with its correlation.

    Of calls starting together, the first; NO_LAUNCH and no thread for a kernel without one.
    """
    correlation = pc.take(table["correlation"], arrow.int64s(kernels))
    linked = full["correlation"].is_in(pl.Series(pc.drop_null(correlation)).implode())
    calls = _columns(full, linked, ("kind", "correlation", "ts_unix_ns", "pid", "tid"))
    runtime = np.flatnonzero(_equal(calls["kind"], RUNTIME_KIND))
    if runtime.size == 0:
        nobody = np.full(kernels.size, None, dtype=object)
        return np.full(kernels.size, NO_LAUNCH, dtype=np.int64), nobody, nobody
    corr, ts = arrow.numpy(calls["correlation"]), arrow.numpy(calls["ts_unix_ns"])
    order = runtime[np.lexsort((ts[runtime], corr[runtime]))]  # stable: of equal times, the first row
    firsts, at = np.unique(corr[order], return_index=True)
    pos, found = _lookup(firsts, arrow.numpy(pc.fill_null(correlation, arrow.scalar(0, correlation.type))))
    found &= _mask(pc.is_valid(correlation))
    call = order[at][pos]
    pids, tids = _objects(calls["pid"])[call], _objects(calls["tid"])[call]
    pids[~found], tids[~found] = None, None
    return np.where(found, ts[call], NO_LAUNCH), pids, tids


def kernel_rows(full: pl.DataFrame, table: pa.Table, top: TopLevel) -> pl.DataFrame:
    """One row per communication kernel; its host context is where it was launched."""
    kernels = np.flatnonzero(_equal(table["kind"], "kernel") & _mask(table["is_comm_kernel"]))
    if kernels.size == 0:
        return pl.DataFrame(schema=COLLECTIVES)
    return _rows(kernels, _launches(full, table, kernels), table, top, own=True)


def annotation_rows(table: pa.Table, top: TopLevel) -> pl.DataFrame:
    """One row per host `nccl:*` annotation (traces without communication kernels)."""
    rows = np.flatnonzero(_host(table) & _mask(pc.starts_with(table["name"], NCCL_ANNOTATION_PREFIX)))
    if rows.size == 0:
        return pl.DataFrame(schema=COLLECTIVES)
    place = (
        arrow.numpy(table["ts_unix_ns"])[rows],
        _objects(table["pid"])[rows],
        _objects(table["tid"])[rows],
    )
    return _rows(rows, place, table, top, own=False)


def collectives_frame(full: pl.DataFrame, comm_args: pl.DataFrame, top: TopLevel) -> pl.DataFrame:
    """All COLLECTIVES rows of one rank trace, in start order."""
    if comm_args.is_empty():
        return pl.DataFrame(schema=COLLECTIVES)
    table = _comm(full, comm_args)
    frame = kernel_rows(full, table, top)
    if frame.is_empty():
        frame = annotation_rows(table, top)
    gloo = gloo_rows(table, top)
    if not gloo.is_empty():
        frame = pl.concat([frame, gloo], how="vertical")
    start = frame["ts_unix_ns"].to_numpy()
    if np.any(start[1:] < start[:-1]):  # kernels in launch order mostly start in order too
        frame = frame[np.argsort(start, kind="stable")]
    return frame
