"""OPS and OP_LAUNCHES from the events frame: the host op tree, module paths, kernel -> op links.

The tree (`tree`) is built over the host events of the kinds in HOST_KINDS plus the runtime
calls, per (pid, tid); an op's parent is its nearest enclosing event of a HOST_KIND (runtime
calls are leaves in practice, and never anyone's parent). Everything is whole-array work: numpy
for the tree, Polars for the joins; the only loop is over module nesting levels (a few dozen).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from tracehouse.pipeline.parsers.kineto import tree
from tracehouse.pipeline.parsers.kineto.events import GPU_KINDS, RUNTIME_KIND
from tracehouse.pipeline.schema import OP_LAUNCHES, OPS

HOST_KINDS = ("cpu_op", "python_function", "user_annotation")
CPU_OP = "cpu_op"
MODULE_PREFIX = "nn.Module: "  # python_function events of modules (profiler with_modules=True)
MODULE_SEPARATOR = "/"


def host_ops(full: pl.DataFrame) -> pl.DataFrame:
    """The host events in thread order with `op_id`, `parent_id`, `depth`, `module` and helper columns.

    Helper columns: `_cpu_op` (op_id of the innermost cpu_op at or above, runtime calls included),
    `_bwd` (of the innermost cpu_op at or above with a non-zero `Fwd thread id`: a backward op).
    """
    host = (
        full.filter(pl.col("kind").is_in([*HOST_KINDS, RUNTIME_KIND]))
        .with_columns((pl.col("ts_unix_ns") + pl.col("dur_ns")).alias("_end"))
        .sort(["pid", "tid", "ts_unix_ns", "_end", "_row"], descending=[False, False, False, True, False])
    )
    thread = host.select(pl.struct("pid", "tid").rle_id()).to_series().to_numpy()
    first = np.flatnonzero(np.r_[True, thread[1:] != thread[:-1]]) if len(thread) else np.zeros(0, np.int64)
    thread_start = first[thread] if len(thread) else np.zeros(0, np.int64)
    parent = tree.enclosing(host["_end"].to_numpy(), thread_start)
    rows = host["_row"].to_numpy()
    kind = host["kind"]
    is_op = kind.is_in(HOST_KINDS).to_numpy()
    is_cpu_op = (kind == CPU_OP).to_numpy()
    op_parent = tree.above(parent, tree.nearest(parent, is_op))
    is_module = (is_op & host["name"].str.starts_with(MODULE_PREFIX).fill_null(False).to_numpy()) & (
        kind == "python_function"
    ).to_numpy()
    backward = is_cpu_op & (host["fwd_thread_id"] != 0).fill_null(False).to_numpy()  # forward ops: 0
    return host.with_columns(
        pl.Series("op_id", rows),
        pl.Series("parent_id", _ids(rows, op_parent), dtype=pl.Int64),
        pl.Series("depth", tree.depths(op_parent), dtype=pl.Int32),
        pl.Series("module", _module_paths(host["name"], parent, is_module)),
        pl.Series("_cpu_op", _ids(rows, tree.nearest(parent, is_cpu_op)), dtype=pl.Int64),
        pl.Series("_bwd", _ids(rows, tree.nearest(parent, backward)), dtype=pl.Int64),
        pl.Series("_is_op", is_op),
    )


def ops_frame(host: pl.DataFrame) -> pl.DataFrame:
    """OPS: the host events of HOST_KINDS, in op_id order."""
    return host.filter(pl.col("_is_op")).sort("op_id").select([pl.col(c).cast(t) for c, t in OPS.items()])


def launches_frame(full: pl.DataFrame, host: pl.DataFrame) -> pl.DataFrame:
    """OP_LAUNCHES: each GPU event with the op that launched it and, if backward, its forward op."""
    gpu = full.filter(pl.col("kind").is_in(GPU_KINDS)).rename({"_row": "event_id"})
    runtime = (
        host.filter((pl.col("kind") == RUNTIME_KIND) & pl.col("correlation").is_not_null())
        .sort("ts_unix_ns", "op_id")
        .unique("correlation", keep="first")  # the earliest call, as launch_ts_unix_ns takes it
        .select("correlation", pl.col("_cpu_op").alias("_by_correlation"), pl.col("_bwd").alias("_bwd_rt"))
    )
    ops = host.filter(pl.col("_is_op"))
    by_external = (
        ops.filter((pl.col("kind") == CPU_OP) & pl.col("external_id").is_not_null())
        .group_by("external_id")
        .agg(pl.col("op_id").min().alias("_by_external"))
    )
    bwd_of = ops.select(pl.col("op_id").alias("_by_external"), pl.col("_bwd").alias("_bwd_ext"))
    linked = (
        gpu.join(runtime, on="correlation", how="left")
        .join(by_external, on="external_id", how="left")
        .join(bwd_of, on="_by_external", how="left")
        .with_columns(
            pl.coalesce("_by_correlation", "_by_external").alias("op_id"),
            pl.when(pl.col("_by_correlation").is_not_null())
            .then("_bwd_rt")
            .otherwise("_bwd_ext")
            .alias("_bwd"),
        )
    )
    fwd = _forward_ops(ops)
    nodes = ops.select(pl.col("op_id").alias("_bwd"), "pid", pl.col("sequence_number").alias("_seq"))
    modules = ops.select("op_id", "module")
    return (
        linked.join(nodes, on="_bwd", how="left", suffix="_node")
        .join(fwd, left_on=["pid_node", "_seq"], right_on=["pid", "sequence_number"], how="left")
        .join(modules, on="op_id", how="left")
        .join(modules.rename({"op_id": "fwd_op_id", "module": "_fwd_module"}), on="fwd_op_id", how="left")
        .with_columns(pl.coalesce("module", "_fwd_module").alias("module"))
        .sort("event_id")
        .select([pl.col(c).cast(t) for c, t in OP_LAUNCHES.items()])
    )


def _forward_ops(ops: pl.DataFrame) -> pl.DataFrame:
    """(pid, sequence_number) -> fwd_op_id: the outermost forward cpu_op (then earliest, lowest id).

    Forward ops carry `Fwd thread id` 0 (or none); backward ops the forward thread's id.
    """
    forward = ops.filter(
        (pl.col("kind") == CPU_OP)
        & (pl.col("fwd_thread_id").fill_null(0) == 0)
        & pl.col("sequence_number").is_not_null()
    )
    return (
        forward.sort("depth", "ts_unix_ns", "op_id")
        .unique(["pid", "sequence_number"], keep="first", maintain_order=True)
        .select("pid", "sequence_number", pl.col("op_id").alias("fwd_op_id"))
    )


def _ids(rows: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """op ids at positions (NONE -> NULL via a masked array)."""
    found = positions != tree.NONE
    return np.ma.masked_array(rows[np.maximum(positions, 0)], ~found)


def _module_paths(names: pl.Series, parent: np.ndarray, is_module: np.ndarray) -> pl.Series:
    """Per position: the path of the innermost module event at or above it (NULL if none).

    A module's path is its enclosing module's path, "/", its name without MODULE_PREFIX; paths
    are built one nesting level of modules at a time (Polars string work per level).
    """
    n = len(parent)
    innermost = tree.nearest(parent, is_module)
    modules = np.flatnonzero(is_module)
    path = pl.Series("module", [None] * n, dtype=pl.String)
    if modules.size == 0:
        return path
    outer = tree.above(parent, innermost)[modules]
    outer_index = np.searchsorted(modules, outer)  # module positions are sorted: index among modules
    module_parent = np.where(outer != tree.NONE, outer_index, tree.NONE)
    level = tree.depths(module_parent)
    label = names.gather(modules).str.strip_prefix(MODULE_PREFIX)
    own = pl.Series([None] * modules.size, dtype=pl.String)
    for depth in range(int(level.max()) + 1):
        at = np.flatnonzero(level == depth)
        above_path = own.gather(np.maximum(module_parent[at], 0)) if depth else None
        here = label.gather(at) if above_path is None else above_path + MODULE_SEPARATOR + label.gather(at)
        own = own.scatter(at, here)
    found = innermost != tree.NONE
    index = np.searchsorted(modules, innermost[found])
    return path.scatter(np.flatnonzero(found), own.gather(index))
