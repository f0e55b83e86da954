"""OPS and OP_LAUNCHES from the events frame: the host op tree, module paths, kernel -> op links.

The tree (`tree`) is built over the host events of the kinds in HOST_KINDS plus the runtime
calls, per (pid, tid); an op's parent is its nearest enclosing event of a HOST_KIND (runtime
calls are leaves in practice, and never anyone's parent). Everything is whole-array work: numpy
arrays over the events frame's positions for the tree, Polars for the joins; the only loop is
over module nesting levels (a few dozen).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from tracehouse.pipeline.ops import calltree as tree
from tracehouse.pipeline.parsers.kineto.events import GPU_KINDS, RUNTIME_KIND
from tracehouse.pipeline.warehouse.schema import OP_LAUNCHES, OPS

HOST_KINDS = ("cpu_op", "python_function", "user_annotation")
CPU_OP = "cpu_op"
MODULE_PREFIX = "nn.Module: "  # python_function events of modules (profiler with_modules=True)
MODULE_SEPARATOR = "/"


@dataclass(frozen=True)
class HostTree:
    """Per position of the events frame (numpy, NONE where there is none)."""

    is_op: np.ndarray  # bool: a HOST_KINDS event
    op_parent: np.ndarray  # position of the nearest enclosing op
    cpu_op: np.ndarray  # position of the innermost cpu_op at or above
    backward: np.ndarray  # of the innermost backward cpu_op (non-zero Fwd thread id) at or above
    depth: np.ndarray  # ops: how many ops enclose it
    module: pl.Series  # module path (String), NULL where no module event is at or above


def host_tree(full: pl.DataFrame) -> HostTree:
    """The call tree of the host events and runtime calls of `full` (the events frame)."""
    kind = full["kind"]
    threads = full.select(pl.struct("pid", "tid").rank("dense")).to_series().to_numpy()
    ends = (full["ts_unix_ns"] + full["dur_ns"]).to_numpy()
    position = _thread_order(
        full["ts_unix_ns"].to_numpy(), ends, threads, kind.is_in([*HOST_KINDS, RUNTIME_KIND])
    )
    thread = threads[position]
    first = np.r_[True, thread[1:] != thread[:-1]] if position.size else np.zeros(0, bool)
    thread_start = np.maximum.accumulate(np.where(first, np.arange(position.size), 0))
    inner = tree.enclosing(ends[position], thread_start)
    parent = np.full(full.height, tree.NONE, dtype=np.int64)
    parent[position] = np.where(inner != tree.NONE, position[np.maximum(inner, 0)], tree.NONE)
    is_op = kind.is_in(HOST_KINDS).to_numpy()
    is_cpu_op = (kind == CPU_OP).to_numpy()
    name = full["name"]
    module_name = name.str.starts_with(MODULE_PREFIX).fill_null(False).to_numpy()
    is_module = (kind == "python_function").to_numpy() & module_name
    backward = is_cpu_op & (full["fwd_thread_id"] != 0).fill_null(False).to_numpy()  # forward ops: 0
    op_parent = tree.above(parent, tree.nearest(parent, is_op))
    return HostTree(
        is_op=is_op,
        op_parent=op_parent,
        cpu_op=tree.nearest(parent, is_cpu_op),
        backward=tree.nearest(parent, backward),
        depth=tree.depths(op_parent),
        module=_module_paths(name, parent, is_module),
    )


def _thread_order(ts: np.ndarray, ends: np.ndarray, threads: np.ndarray, chosen: pl.Series) -> np.ndarray:
    """Positions of the chosen events in thread order: (pid, tid), start, end descending, position.

    numpy's lexsort on integer keys (`threads`: one number per distinct (pid, tid)): several
    times faster here than a Polars sort on the text columns.
    """
    position = np.flatnonzero(chosen.to_numpy())
    return position[np.lexsort((position, -ends[position], ts[position], threads[position]))]


def ops_frame(full: pl.DataFrame, host: HostTree) -> pl.DataFrame:
    """OPS: the host events of HOST_KINDS, in op_id (file) order."""
    rows = full["_row"]
    return (
        full.with_columns(
            _at(rows, host.op_parent).alias("parent_id"),
            pl.Series("depth", host.depth, dtype=pl.Int32),
            host.module.alias("module"),
        )
        .filter(pl.lit(pl.Series(host.is_op)))
        .select(pl.col("_row").alias("op_id"), *[pl.col(c).cast(t) for c, t in OPS.items() if c != "op_id"])
    )


def launches_frame(full: pl.DataFrame, host: HostTree) -> pl.DataFrame:
    """OP_LAUNCHES: each GPU event with the op that launched it and, if backward, its forward op.

    Lookups by key go through sorted arrays (numpy searchsorted); positions of the events frame.
    """
    kind = full["kind"]
    gpu = np.flatnonzero(kind.is_in(GPU_KINDS).to_numpy())
    correlation, has_correlation = _values(full["correlation"])
    external, has_external = _values(full["external_id"])
    ts = full["ts_unix_ns"].to_numpy()
    runtime = np.flatnonzero((kind == RUNTIME_KIND).to_numpy() & has_correlation)
    runtime = runtime[np.lexsort((runtime, ts[runtime]))]  # earliest first, as launch_ts_unix_ns
    call = _first_match(correlation, runtime, correlation[gpu], has_correlation[gpu])
    by_call = np.where(call != tree.NONE, host.cpu_op[np.maximum(call, 0)], tree.NONE)
    tagged = np.flatnonzero((kind == CPU_OP).to_numpy() & has_external)  # lowest op_id first
    by_external = _first_match(external, tagged, external[gpu], has_external[gpu])
    op = np.where(by_call != tree.NONE, by_call, by_external)
    node = np.where(
        by_call != tree.NONE,
        host.backward[np.maximum(call, 0)],
        np.where(by_external != tree.NONE, host.backward[np.maximum(by_external, 0)], tree.NONE),
    )
    fwd = _forward(full, host, node)
    rows = full["_row"]
    return (
        full.filter(pl.col("kind").is_in(GPU_KINDS))  # the rows of `gpu`, in order
        .select(pl.col("_row").alias("event_id"), *[c for c in OP_LAUNCHES if c in full.columns])
        .with_columns(
            _at(rows, op).alias("op_id"),
            _at(rows, fwd).alias("fwd_op_id"),
            pl.coalesce(_at(host.module, op), _at(host.module, fwd)).alias("module"),
        )
        .select([pl.col(c).cast(t) for c, t in OP_LAUNCHES.items()])
    )


def _values(column: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """An Int64 column as (int64 values, 0 where NULL; validity)."""
    return column.fill_null(0).to_numpy(), column.is_not_null().to_numpy()


def _first_match(
    key: np.ndarray, candidates: np.ndarray, queries: np.ndarray, valid: np.ndarray
) -> np.ndarray:
    """Per query: the first of `candidates` (in their order) whose key equals it, else NONE."""
    if candidates.size == 0:
        return np.full(queries.size, tree.NONE)
    keys = key[candidates]
    order = np.argsort(keys, kind="stable")  # stable: candidates keep their order within a key
    keys, candidates = keys[order], candidates[order]
    first = np.r_[True, keys[1:] != keys[:-1]]
    keys, candidates = keys[first], candidates[first]
    at = np.minimum(np.searchsorted(keys, queries), keys.size - 1)
    return np.where(valid & (keys[at] == queries), candidates[at], tree.NONE)


def _forward(full: pl.DataFrame, host: HostTree, node: np.ndarray) -> np.ndarray:
    """Per backward node position: its forward op's position (OP_LAUNCHES.fwd_op_id), else NONE.

    The forward op is the outermost cpu_op with the node's sequence number and `Fwd thread id`
    0 or none on the node's pid (then the earliest, then the first in the file).
    """
    has_sequence = full["sequence_number"].is_not_null().to_numpy()
    forward = (
        (full["kind"] == CPU_OP).to_numpy()
        & (full["fwd_thread_id"].fill_null(0) == 0).to_numpy()
        & has_sequence
    )
    candidates = np.flatnonzero(forward)
    ts = full["ts_unix_ns"].to_numpy()
    candidates = candidates[np.lexsort((candidates, ts[candidates], host.depth[candidates]))]
    at = np.maximum(node, 0)
    asked = (node != tree.NONE) & has_sequence[at]
    # one integer per (pid, sequence number) among the candidates and the nodes asked about
    pairs = full.select("pid", "sequence_number")[np.r_[candidates, at]]
    code = (
        pairs.select(pl.struct("pid", "sequence_number").rank("dense"))
        .to_series()
        .to_numpy()
        .astype(np.int64)
    )
    key = np.zeros(full.height, np.int64)
    key[candidates] = code[: candidates.size]
    return _first_match(key, candidates, code[candidates.size :], asked)


def _at(values: pl.Series, positions: np.ndarray) -> pl.Series:
    """values[position] for each position, NULL where the position is NONE."""
    found = pl.Series(positions != tree.NONE)
    return pl.select(pl.when(found).then(values.gather(np.maximum(positions, 0)))).to_series()


def _module_paths(names: pl.Series, parent: np.ndarray, is_module: np.ndarray) -> pl.Series:
    """Per position: the path of the innermost module event at or above it (NULL if none).

    A module's path is its enclosing module's path, "/", its name without MODULE_PREFIX; paths
    are built one nesting level of modules at a time (Polars string work per level).
    """
    innermost = tree.nearest(parent, is_module)
    modules = np.flatnonzero(is_module)
    if modules.size == 0:
        return pl.repeat(None, len(parent), dtype=pl.String, eager=True)
    outer = tree.above(parent, innermost)[modules]
    module_parent = np.where(outer != tree.NONE, np.searchsorted(modules, outer), tree.NONE)
    level = tree.depths(module_parent)
    label = names.gather(modules).str.strip_prefix(MODULE_PREFIX)
    own = pl.repeat(None, modules.size, dtype=pl.String, eager=True)
    for depth in range(int(level.max()) + 1):
        at = np.flatnonzero(level == depth)
        here = label.gather(at)
        if depth:
            here = own.gather(module_parent[at]) + MODULE_SEPARATOR + here
        own = own.scatter(at, here)
    found = innermost != tree.NONE
    index = np.searchsorted(modules, np.where(found, innermost, modules[0]))
    return pl.select(pl.when(pl.Series(found)).then(own.gather(index))).to_series()
