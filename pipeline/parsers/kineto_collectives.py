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
* `gloo` / `label` (CPU traces): see `kineto_gloo`.

bytes follow the nccl-tests "size" convention: `max(in_nelems, out_nelems) × dtype size`,
i.e. all_reduce/broadcast/reduce/send/recv: the buffer; all_gather: the total OUTPUT;
reduce_scatter: the total INPUT; all_to_all: the total sent. When only a host tensor shape
is known (`Input Dims` of one input), all_gather multiplies it by the group size (NULL when
unknown). `seq`: args `Seq` of the kernel or of `record_param_comms`, else that op's
`Sequence number`, else NULL. process_group/pg_desc/group_size fall back to the single group
of `distributedInfo.pg_config` when there is exactly one.
"""

from __future__ import annotations

import polars as pl
from tracehouse.pipeline.parsers.comm_names import dtype_name, dtype_size, kernel_op, op_name
from tracehouse.pipeline.parsers.kineto_commargs import per_value
from tracehouse.pipeline.parsers.kineto_gloo import gloo_rows
from tracehouse.pipeline.parsers.kineto_meta import TopLevel
from tracehouse.pipeline.parsers.kineto_names import is_comm_kernel
from tracehouse.pipeline.parsers.kineto_spans import THREAD, enclosing
from tracehouse.pipeline.schema import COLLECTIVES

HOST_KINDS = ("cpu_op", "user_annotation", "other", "python_function")
COLLECTIVES_EXPRS = {c: pl.col(c) for c in COLLECTIVES}
# What _resolve reads from the enclosing record_param_comms.
NO_LAUNCH = -(2**62)
LAUNCH = {"launch_at": pl.Int64, "launch_pid": pl.String, "launch_tid": pl.String}
RPC_ARGS = ("collective_name", "dtype", "group_size", "pg_name", "pg_desc", "seq", "in_nelems", "out_nelems")


def _comm(full: pl.DataFrame, comm_args: pl.DataFrame) -> pl.DataFrame:
    """The candidate events (`_comm`) with their comm args."""
    comm = full.filter(pl.col("_comm")).drop("_comm", "_step")
    return comm.join(comm_args, on="_row", how="inner")


def _launch_threads(full: pl.DataFrame, kernels: pl.DataFrame) -> pl.DataFrame:
    """launch_at / launch_pid / launch_tid of each kernel: its earliest runtime call (by correlation).

    A kernel with no runtime call gets launch_at = -2**62 (before everything: no host context).
    """
    correlations = kernels["correlation"].drop_nulls().implode()
    runtime = full.filter((pl.col("kind") == "runtime") & pl.col("correlation").is_in(correlations))
    first: dict[int, tuple[int, str | None, str | None]] = {}
    for corr, ts, pid, tid in runtime.select("correlation", "ts_unix_ns", "pid", "tid").iter_rows():
        if corr not in first or ts < first[corr][0]:
            first[corr] = (ts, pid, tid)
    found = [first.get(corr, (NO_LAUNCH, None, None)) for corr in kernels["correlation"].to_list()]
    return pl.DataFrame(found, schema=LAUNCH, orient="row")


def _host_context(rows: pl.DataFrame, comm: pl.DataFrame, at: str, thread: tuple[str, str]) -> pl.DataFrame:
    """Attach the enclosing record_param_comms (rpc_*) and nccl:* annotation (ann_*) on the thread."""
    host = pl.col("kind").is_in(HOST_KINDS)
    rpc = comm.filter(host & (pl.col("name") == "record_param_comms"))
    ann = comm.filter(host & pl.col("name").str.starts_with("nccl:"))
    rows = enclosing(rows, at, rpc, RPC_ARGS, "rpc_", thread=thread)
    return enclosing(rows, at, ann, ("name", "numel", "input_type"), "ann_", thread=thread)


def _single_group(top: TopLevel) -> dict[str, object]:
    groups = top.pg_config
    if len(groups) != 1:
        return {"process_group": None, "pg_desc": None, "group_size": None}
    g = groups[0]
    return {
        "process_group": None if g.get("pg_name") is None else str(g.get("pg_name")),
        "pg_desc": g.get("pg_desc") if isinstance(g.get("pg_desc"), str) else None,
        "group_size": g.get("pg_size") if type(g.get("pg_size")) is int else None,
    }


def _resolve(rows: pl.DataFrame, top: TopLevel, source: str, own: bool) -> pl.DataFrame:
    """Pick each field from the row's own args (when `own`), record_param_comms, the annotation."""
    single = _single_group(top)

    def pick(col: str) -> pl.Expr:
        own_col = [pl.col(col)] if own else []
        return pl.coalesce([*own_col, pl.col(f"rpc_{col}")])

    texts = rows.select(
        pick("collective_name").alias("coll"),
        pl.col("ann_name"),
        pl.col("name"),
        pl.coalesce(pick("dtype"), pl.col("ann_input_type")).alias("dtype"),
    )
    dtype = per_value(texts["dtype"], dtype_name, "dtype")
    frame = rows.with_columns(
        pl.coalesce(
            per_value(texts["coll"], op_name, "coll_op"),
            per_value(texts["ann_name"], op_name, "ann_op"),
            per_value(texts["name"], kernel_op if own else op_name, "name_op"),
        ).alias("op"),
        dtype,
        per_value(dtype, dtype_size, "dtype_bytes", pl.Int64),
        pl.coalesce(pick("group_size"), pl.lit(single["group_size"], pl.Int64)).alias("group_size"),
        pl.coalesce(pick("pg_name"), pl.lit(single["process_group"], pl.String)).alias("process_group"),
        pl.coalesce(pick("pg_desc"), pl.lit(single["pg_desc"], pl.String)).alias("pg_desc"),
        # Only a collective's own sequence number: the ops' "Sequence number" arg is autograd's,
        # and a wrong seq would match instances confidently but wrongly (order matching is safe).
        pick("seq").alias("seq"),
        pl.max_horizontal(pick("in_nelems"), pick("out_nelems")).alias("nelems"),
    )
    shape_nelems = (
        pl.when(pl.col("op") == "all_gather")
        .then(pl.col("ann_numel") * pl.col("group_size"))
        .otherwise(pl.col("ann_numel"))
    )
    nbytes = pl.coalesce("nelems", shape_nelems) * pl.col("dtype_bytes")
    columns = {**COLLECTIVES_EXPRS, "bytes": nbytes, "source": pl.lit(source)}
    return frame.select([expr.cast(COLLECTIVES[c]).alias(c) for c, expr in columns.items()])


def kernel_rows(full: pl.DataFrame, comm: pl.DataFrame, top: TopLevel) -> pl.DataFrame:
    """One row per communication kernel."""
    kernels = comm.filter(
        (pl.col("kind") == "kernel") & per_value(comm["name"], is_comm_kernel, "k", pl.Boolean)
    )
    if kernels.is_empty():
        return pl.DataFrame(schema=COLLECTIVES)
    rows = kernels.hstack(_launch_threads(full, kernels).get_columns())
    rows = _host_context(rows, comm, "launch_at", ("launch_pid", "launch_tid"))
    return _resolve(rows, top, "nccl_kernel", own=True)


def annotation_rows(comm: pl.DataFrame, top: TopLevel) -> pl.DataFrame:
    """One row per host `nccl:*` annotation (traces without communication kernels)."""
    ann = comm.filter(pl.col("kind").is_in(HOST_KINDS) & pl.col("name").str.starts_with("nccl:"))
    if ann.is_empty():
        return pl.DataFrame(schema=COLLECTIVES)
    rows = ann.select(
        "pid",
        "tid",
        "name",
        "ts_unix_ns",
        "dur_ns",
        pl.col("name").alias("own_name"),
        pl.col("numel").alias("own_numel"),
        pl.col("input_type").alias("own_type"),
    )
    rows = _host_context(rows.with_columns(pl.col("ts_unix_ns").alias("at")), comm, "at", THREAD)
    # The annotation is its own `nccl:*` context (the join above finds itself or an outer one).
    rows = rows.with_columns(
        pl.col("own_name").alias("ann_name"),
        pl.col("own_numel").alias("ann_numel"),
        pl.col("own_type").alias("ann_input_type"),
    )
    return _resolve(rows, top, "cpu_annotation", own=False)


def collectives_frame(full: pl.DataFrame, comm_args: pl.DataFrame, top: TopLevel) -> pl.DataFrame:
    """All COLLECTIVES rows of one rank trace, in start order."""
    if comm_args.is_empty():
        return pl.DataFrame(schema=COLLECTIVES)
    comm = _comm(full, comm_args)
    parts = [kernel_rows(full, comm, top)]
    if parts[0].is_empty() and any(n is not None and n.startswith("nccl:") for n in comm["name"].to_list()):
        parts.append(annotation_rows(comm, top))
    parts.append(gloo_rows(comm, top))
    return pl.concat(parts, how="vertical").sort("ts_unix_ns", maintain_order=True)
