"""The critical path of a replayed step across ranks, and each op's slack (docs/projection.md).

The replay records, per node, the edge whose source set its time (its winning predecessor).
Walking those edges back from the end of the slowest rank's window to the window's start gives
the chain of edges that sets the step's length; it leaves a rank where a collective's arrival was
set by another rank's start. Each edge is one segment, classed by what it is (graph.Segment), so
the segments sum to the replayed step time. An op's slack is how much one of its calls could grow
before some rank's window of the step grows: the latest time its end may reach (a backward pass
from every window's end at its start plus the step time) minus its end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tracehouse.pipeline.projection.build import RunGraph
from tracehouse.pipeline.projection.graph import SEGMENT_NAMES, ReplayGraph, Segment

# Edges whose own duration is an op's work: what op_slack reports.
OP_KINDS = (Segment.COMPUTE, Segment.COPY, Segment.TRANSFER)
BEFORE_TRACE = "(before the rank's first traced instant)"


@dataclass(frozen=True)
class PathSegment:
    """One segment of a critical path: ns after the window's start, its rank, class and op."""

    rank: int
    kind: str
    op: str | None
    start_ns: float
    dur_ns: float
    op_id: int | None = None  # the host op (ops.op_id on `rank`) that launched the kernel or copy


@dataclass(frozen=True)
class OpSlack:
    """One op of one rank in one step: its calls, their device (or own) time and least slack."""

    rank: int
    op: str | None
    kind: str
    calls: int
    dur_ns: float
    slack_ns: float | None  # None: no call reaches the end of a window of the step


def walk_back(g: ReplayGraph, times: np.ndarray, winners: np.ndarray, end: int, start: float) -> list[int]:
    """The winning edges from node `end` back to the first node at or before `start`, earliest
    first; -1 closes a path that reached an anchor after `start` (a rank traced later)."""
    edges: list[int] = []
    node = end
    while times[node] > start:
        edge = int(winners[node])
        edges.append(edge)
        if edge < 0:
            break
        node = int(g.src[edge])
    return edges[::-1]


def path_segments(
    g: ReplayGraph, times: np.ndarray, edges: list[int], end: int, start: float
) -> list[PathSegment]:
    """The walked edges as segments (the first clipped at `start`), consecutive ones of the same
    rank, class, op and launching op merged, empty ones dropped except where the path changes rank
    (`wait`)."""
    out: list[PathSegment] = []
    # an edge ends at its destination; the anchor (-1, first) is the source of the edge after it
    ends = [int(g.dst[e]) if e >= 0 else int(g.src[edges[1]]) if len(edges) > 1 else end for e in edges]
    following = [*edges[1:], -1][: len(edges)]
    for edge, dst, after in zip(edges, ends, following, strict=True):
        if edge < 0:  # the path began at an anchor after the window opened
            segment = PathSegment(int(g.rank[dst]), "host_gap", BEFORE_TRACE, 0.0, times[dst] - start)
        else:
            segment = _segment(g, times, edge, after, dst, start)
        if segment is None:
            continue
        last = out[-1] if out else None
        if last and (last.rank, last.kind, last.op, last.op_id) == (
            segment.rank,
            segment.kind,
            segment.op,
            segment.op_id,
        ):
            out[-1] = PathSegment(
                last.rank, last.kind, last.op, last.start_ns, last.dur_ns + segment.dur_ns, last.op_id
            )
        elif segment.dur_ns != 0 or segment.kind == "wait":
            out.append(segment)
    return out


def _segment(
    g: ReplayGraph, times: np.ndarray, edge: int, after: int, dst: int, start: float
) -> PathSegment | None:
    """One walked edge as a segment; a wait names the rank waited for and is kept only when the
    waiting rank (that of the edge `after` it, a transfer's end) is another rank."""
    src = int(g.src[edge])
    lo = max(times[src], start)
    label = g.labels[g.label[edge]] if g.label[edge] >= 0 else None
    kind = Segment(int(g.kind[edge]))
    if kind == Segment.WAIT:
        waiting = int(g.rank[g.dst[after]]) if after >= 0 else -1
        waited = int(g.rank[src])
        if waiting < 0 or waiting == waited:
            return None
        return PathSegment(waiting, "wait", f"{label} waits for rank {waited}", lo - start, times[dst] - lo)
    rank = int(g.rank[dst]) if g.rank[dst] >= 0 else int(g.rank[src])
    launcher = int(g.op_id[edge])
    op_id = launcher if launcher >= 0 else None
    return PathSegment(rank, SEGMENT_NAMES[kind], label, lo - start, times[dst] - lo, op_id)


def latest_times(g: ReplayGraph, weights: np.ndarray, deadlines: dict[int, float]) -> np.ndarray:
    """Per node, the latest time it may reach without any deadline node passing its deadline
    (+inf for a node from which no deadline node is reached): a backward pass in reverse
    topological order."""
    latest = np.full(g.n_nodes, np.inf)
    for node, deadline in deadlines.items():
        latest[node] = min(latest[node], deadline)
    src = g.src.tolist()
    weight = weights.tolist()
    offsets = g.offsets.tolist()
    late = latest.tolist()
    order = g.order.tolist()
    for i in range(len(order) - 1, -1, -1):
        bound = late[order[i]]
        if bound == np.inf:
            continue
        for k in range(offsets[i], offsets[i + 1]):
            value = bound - weight[k]
            if value < late[src[k]]:
                late[src[k]] = value
    return np.array(late, dtype=np.float64)


def edge_slack(g: ReplayGraph, times: np.ndarray, weights: np.ndarray, latest: np.ndarray) -> np.ndarray:
    """Per edge, how much its weight could grow before a deadline is passed (+inf: none reached)."""
    return latest[g.dst] - (times[g.src] + weights)


@dataclass(frozen=True)
class StepPath:
    """A replayed step's critical path (on its slowest rank's window) and its ops' slack."""

    step: int | None
    rank: int
    step_ns: float
    segments: list[PathSegment]
    slack: list[OpSlack]


def step_paths(run: RunGraph, weights: np.ndarray) -> list[StepPath]:
    """Every step's critical path and op slack, from one replay with these weights."""
    g = run.graph
    times, winners = g.replay_with_winners(weights)
    per_step = run.step_times(times)
    out = []
    for step, ranks in per_step.items():
        if not ranks:
            continue
        rank = max(ranks, key=lambda r: ranks[r])
        start, end = run.window_nodes(times, rank, step)
        lo = float(times[start])
        edges = walk_back(g, times, winners, end, lo)
        step_ns = float(times[end]) - lo
        deadlines = {}
        bounds = {}
        for r in ranks:
            s, e = run.window_nodes(times, r, step)
            deadline = float(times[s]) + step_ns
            deadlines[e] = min(deadlines.get(e, np.inf), deadline)
            bounds[r] = (float(times[s]), float(times[e]))
        slack = edge_slack(g, times, weights, latest_times(g, weights, deadlines))
        out.append(
            StepPath(
                step,
                rank,
                step_ns,
                path_segments(g, times, edges, end, lo),
                _op_slack(g, times, slack, bounds),
            )
        )
    return out


def _op_slack(
    g: ReplayGraph, times: np.ndarray, slack: np.ndarray, bounds: dict[int, tuple[float, float]]
) -> list[OpSlack]:
    """Per rank and op: the op edges that start in the rank's window, their calls, time and least
    slack (never below 0: a call on the path has none)."""
    edges = np.flatnonzero(np.isin(g.kind, OP_KINDS) & (g.cost != 0))  # the work's own edges, no joins
    ranks, begins = g.rank[g.dst[edges]], times[g.src[edges]]
    inside = np.zeros(len(edges), dtype=bool)
    for rank, (lo, hi) in bounds.items():
        inside |= (ranks == rank) & (begins >= lo) & (begins < hi)
    edges = edges[inside]
    keys = np.stack([g.rank[g.dst[edges]], g.kind[edges], g.label[edges]])
    order = np.lexsort(keys[::-1])  # by rank, kind, op; stable: each group's edges in graph order
    edges, keys = edges[order], keys[:, order]
    cuts = np.flatnonzero(np.any(np.diff(keys, axis=1) != 0, axis=0)) + 1
    durs = (times[g.dst[edges]] - times[g.src[edges]]).tolist()
    out = []
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(edges)], strict=True):
        if a == b:
            continue
        rank, kind, label = (int(x) for x in keys[:, a])
        least = float(np.min(slack[edges[a:b]]))
        op = g.labels[label] if label >= 0 else None
        slack_ns = max(0.0, least) if np.isfinite(least) else None
        out.append(OpSlack(rank, op, SEGMENT_NAMES[Segment(kind)], b - a, float(sum(durs[a:b])), slack_ns))
    return out
