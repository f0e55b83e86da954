"""The replay graph: time points joined by max-plus edges, evaluated in topological order.

A node is an instant of the replayed run (a kernel's start, a host call's end, the last arrival
at a collective instance). Its replayed time is the latest of `time(source) + weight` over its
incoming edges; a node without incoming edges is an anchor and keeps its measured time (only
each rank's first host instant is one, and device work whose launch predates the trace). The
weight of an edge is a fixed part (measured gaps, launch latencies, residuals) plus a scalable
part (a kernel's duration, a collective's transfer), so a scenario changes the scalable parts and
replays the same graph again.

Every weight is derived from the measurement so that replaying with the measured durations puts
every node back at its measured time: the identity check of the replay (see `docs/projection.md`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np


class Cost(IntEnum):
    """What the scalable part of an edge is: the kind a scenario scales."""

    FIXED = 0  # no scalable part: host gaps, launch delays, residuals
    COMPUTE_MATMUL = 1  # matmul / attention kernels (GPU)
    COMPUTE_OTHER = 2  # every other kernel; on CPU traces, the main thread's compute self time
    MEMORY = 3  # memcpy / memset
    TRANSFER = 4  # a matched collective instance's transfer (instance column names it)
    COMM_LOCAL = 5  # a communication interval with no matched instance: its own duration


class Segment(IntEnum):
    """What an edge is on the critical path (critical_path.kind): its class for a reader."""

    COMPUTE = 0  # a kernel, or a CPU rank's compute self time
    COPY = 1  # memcpy / memset on the device
    TRANSFER = 2  # a collective's transfer (arrival to end), or an unmatched one's duration
    WAIT = 3  # a collective's arrival set by another rank's start: this rank waits for it
    HOST = 4  # a host runtime call's own duration
    HOST_GAP = 5  # host time between runtime calls (CPU ranks: main-thread time that is not compute)
    LAUNCH_DELAY = 6  # from a launch call to the work's start
    STREAM_WAIT = 7  # work waiting for work on another stream (the cross-stream fallback)
    SYNC_TAIL = 8  # from the awaited work's end to the synchronising call's (or piece's) end
    RESIDUAL = 9  # a queue idle after its predecessor that no dependency explains (kept as measured)


SEGMENT_NAMES = {s: s.name.lower() for s in Segment}


class Phase(IntEnum):
    """The training phase a compute cost belongs to (how data-parallel scaling treats it)."""

    STEP = 0  # forward and backward: work per token
    OPTIMIZER = 1  # Optimizer.step / zero_grad: work per parameter (shard)
    FSDP_HOOK = 2  # inside FSDP's hooks (FSDP::*, CPU ranks): scales as STEP; gone when projected as DDP


@dataclass
class GraphBuilder:
    """Nodes and edges added one by one; `freeze()` sorts them into a `ReplayGraph`."""

    def __post_init__(self) -> None:
        self._measured: list[int] = []
        self._rank: list[int] = []
        self._edges: list[tuple[int, int, int, float, float, int, int, int, int, int, float, int]] = []
        self._labels: dict[str, int] = {}

    def node(self, measured_ns: int, rank: int) -> int:
        """A new time point of `rank`, measured at `measured_ns`; returns its id."""
        self._measured.append(int(measured_ns))
        self._rank.append(rank)
        return len(self._measured) - 1

    def edge(
        self,
        src: int,
        dst: int,
        *,
        fixed: float = 0.0,
        base: float = 0.0,
        cost: Cost = Cost.FIXED,
        phase: Phase = Phase.STEP,
        instance: int = -1,
        kind: Segment = Segment.HOST_GAP,
        label: str | None = None,
        op_id: int | None = None,
        split: tuple[int, float] | None = None,
    ) -> None:
        """time(dst) >= time(src) + fixed + scaled(base): ns; `instance` for TRANSFER edges;
        `kind` and `label` (the op) say what the edge is on a critical path; `op_id`: the host op
        (ops.op_id of the edge's rank) that launched a kernel or copy, where the trace links it;
        `split`: (class code, FLOPs) of the op a compute edge is the time of, where tensor
        parallelism would split it (efficiency.py)."""
        name = -1 if label is None else self._labels.setdefault(label, len(self._labels))
        op_class, flops = split or (-1, 0.0)
        # one flat row, converted to float64 by `freeze` (the enums are ints; op ids < 2**53)
        launcher = -1 if op_id is None else op_id
        row = (src, dst, cost, base, fixed, phase, instance, kind, name, launcher, flops, op_class)
        self._edges.append(row)

    def measured(self, node: int) -> int:
        """The measured time of a node already added."""
        return self._measured[node]

    def freeze(self) -> ReplayGraph:
        """The graph with its edges grouped by destination in a topological order of the nodes."""
        n = len(self._measured)
        edges = np.array(self._edges, dtype=np.float64).reshape(-1, 12)  # op ids < 2**53: exact
        src = edges[:, 0].astype(np.int64)
        dst = edges[:, 1].astype(np.int64)
        order = topological_order(n, src, dst)
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        by_dst = np.lexsort((src, position[dst]))
        edges = edges[by_dst]
        dst = dst[by_dst]
        counts = np.bincount(position[dst], minlength=n)
        return ReplayGraph(
            measured=np.array(self._measured, dtype=np.int64),
            rank=np.array(self._rank, dtype=np.int64),
            order=order,
            offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            src=edges[:, 0].astype(np.int64),
            dst=dst,
            cost=edges[:, 2].astype(np.int64),
            base=edges[:, 3],
            fixed=edges[:, 4],
            phase=edges[:, 5].astype(np.int64),
            instance=edges[:, 6].astype(np.int64),
            kind=edges[:, 7].astype(np.int64),
            label=edges[:, 8].astype(np.int64),
            labels=list(self._labels),
            op_id=edges[:, 9].astype(np.int64),
            split_flops=edges[:, 10],
            split_class=edges[:, 11].astype(np.int64),
        )


class GraphCycleError(RuntimeError):
    """The graph has a cycle: a tracehouse bug in a measured run's graph; in one with planned
    collectives, a plan whose order on some rank contradicts the measured collectives'."""


def topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Kahn's algorithm, ties by node id; a cycle is a GraphCycleError."""
    indegree = np.bincount(dst, minlength=n)
    out_order = np.argsort(src, kind="stable")
    out_offsets = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    out_dst = dst[out_order]
    ready = list(np.flatnonzero(indegree == 0)[::-1])
    indegree = indegree.tolist()
    order: list[int] = []
    while ready:
        node = ready.pop()
        order.append(node)
        for target in out_dst[out_offsets[node] : out_offsets[node + 1]].tolist():
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    if len(order) != n:
        raise GraphCycleError(f"replay graph has a cycle ({n - len(order)} nodes on it)")
    return np.array(order, dtype=np.int64)


@dataclass(frozen=True)
class ReplayGraph:
    """Nodes (measured time, rank) and in-edges grouped by destination in topological order."""

    measured: np.ndarray
    rank: np.ndarray
    order: np.ndarray  # node ids, topological
    offsets: np.ndarray  # edges of order[i] are [offsets[i], offsets[i+1])
    src: np.ndarray
    dst: np.ndarray
    cost: np.ndarray
    base: np.ndarray
    fixed: np.ndarray
    phase: np.ndarray
    instance: np.ndarray
    kind: np.ndarray  # Segment per edge
    label: np.ndarray  # index into labels, -1 for none
    labels: list[str]
    op_id: np.ndarray  # per edge: the host op that launched its kernel or copy (ops.op_id), -1 for none
    split_flops: np.ndarray  # per edge: the FLOPs of the op tensor parallelism would split (0: none)
    split_class: np.ndarray  # per edge: that op's class (efficiency.SPLIT_CLASSES index), -1 for none

    @property
    def n_nodes(self) -> int:
        return len(self.measured)

    @property
    def origin(self) -> int:
        """The earliest measured instant: replayed times are ns after it (epoch ns do not fit a
        float64 to the ns)."""
        return int(self.measured.min()) if len(self.measured) else 0

    def measured_times(self) -> np.ndarray:
        """The measured times, in the replay's frame (ns after `origin`, float)."""
        return (self.measured - self.origin).astype(np.float64)

    def replay(self, weights: np.ndarray) -> np.ndarray:
        """Every node's replayed time, ns after `origin` (float), given one weight per edge."""
        return self.replay_with_winners(weights)[0]

    def replay_with_winners(self, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Replayed times and, per node, the edge whose source set its time (-1 for an anchor;
        the first such edge in the graph's edge order at a tie)."""
        times = self.measured_times()
        src = self.src.tolist()
        weight = weights.tolist()
        offsets = self.offsets.tolist()
        t = times.tolist()
        winner = [-1] * len(t)
        for i, node in enumerate(self.order.tolist()):
            lo, hi = offsets[i], offsets[i + 1]
            if lo == hi:
                continue  # an anchor keeps its measured time
            best, won = t[src[lo]] + weight[lo], lo
            for k in range(lo + 1, hi):
                value = t[src[k]] + weight[k]
                if value > best:
                    best, won = value, k
            t[node] = best
            winner[node] = won
        return np.array(t, dtype=np.float64), np.array(winner, dtype=np.int64)

    def measured_weights(self, transfer_ns: np.ndarray) -> np.ndarray:
        """The weights of the measured run: every scale factor 1, each instance's measured transfer."""
        weights = self.fixed + self.base
        is_transfer = self.cost == Cost.TRANSFER
        weights[is_transfer] = self.fixed[is_transfer] + transfer_ns[self.instance[is_transfer]]
        return weights
