"""What the rank builders share: the run being built, its collective instances, the placement of
work on a queue (a stream, a gloo thread) and how a rank's windows are read off the replay."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from statistics import median

import polars as pl
from tracehouse.pipeline.common.comm_names import dtype_name
from tracehouse.pipeline.projection.graph import Cost, GraphBuilder, Segment
from tracehouse.pipeline.projection.timeline import RunTimeline

# A kernel that starts at most this long after work on another stream ended waits for that work
# (the trace records no cross-stream dependency the warehouse keeps; see docs/projection.md).
CROSS_STREAM_NS = 10_000


@dataclass
class Instances:
    """Matched collective instances across the run: one arrival node each."""

    key_index: dict[tuple, int] = field(default_factory=dict)
    transfer_ns: list[float] = field(default_factory=list)
    op: list[str | None] = field(default_factory=list)
    bytes: list[int | None] = field(default_factory=list)
    group_size: list[int | None] = field(default_factory=list)
    dim: list[str] = field(default_factory=list)
    dtype: list[str | None] = field(default_factory=list)  # the element type it moves (comm_names.dtype_name)
    members: list[list[tuple[int, int, int]]] = field(default_factory=list)  # (rank, start, end node)
    arrival: list[int] = field(default_factory=list)  # the arrival node (join_instances adds it)

    def add(self, key: tuple, row: dict) -> int:
        """The instance of `key`, added from its first member's comm_intervals row."""
        if key not in self.key_index:
            self.key_index[key] = len(self.transfer_ns)
            self.transfer_ns.append(float(row["transfer_ns"]))
            self.op.append(row["op"])
            self.bytes.append(row["bytes"])
            self.group_size.append(row["group_size"])
            self.dim.append(row["parallel_dim"])
            self.dtype.append(dtype_name(row.get("dtype")))
            self.members.append([])
        return self.key_index[key]


@dataclass(frozen=True)
class RankWindows:
    """How one rank's step windows are read off the replayed times."""

    rank: int
    steps: list[int | None]
    starts: list[list[int]]  # per step: nodes whose earliest time opens the window
    last_ends: list[int]  # nodes whose latest time closes the last window (GPU rule)
    ends: list[int | None]  # per step: the node closing it (CPU rule), else None


@dataclass
class RunContext:
    """The run being built: the graph, the timeline, the instances and intervals the ranks add."""

    b: GraphBuilder
    timeline: RunTimeline
    instances: Instances = field(default_factory=Instances)
    keys: dict[tuple[int, int, int], tuple] = field(default_factory=dict)
    intervals: list[tuple[int, int, int, str, str | None]] = field(default_factory=list)

    def comm_end(self, rank: int, start: int, end: int, duration: int, comm: dict | None) -> None:
        """A communication interval's end: its instance's arrival plus transfer, else its own duration."""
        key = None if comm is None else self.keys.get((rank, comm["start_ns"], comm["end_ns"]))
        if key is None:
            label = None if comm is None else comm["name"]
            self.b.edge(start, end, base=duration, cost=Cost.COMM_LOCAL, kind=Segment.TRANSFER, label=label)
            return
        i = self.instances.add(key, comm)
        self.instances.members[i].append((rank, start, end))


def instance_keys(comm: pl.DataFrame) -> dict[tuple[int, int, int], tuple]:
    """(rank, start, end) of each matched interval -> its instance key (the collective_instances rule).

    By (process group, seq) where the group's calls all have one, else by order of appearance in
    the group on each rank; intervals without a measured transfer are left out (unmatched).
    """
    keys: dict[tuple[int, int, int], tuple] = {}
    matched = comm.filter(pl.col("transfer_ns").is_not_null())
    for (group,), rows in matched.group_by(["process_group"], maintain_order=True):
        by_seq = rows["seq"].null_count() == 0
        for (rank,), rank_rows in rows.group_by(["rank"], maintain_order=True):
            ordered = rank_rows.sort(["start_ns", "seq", "end_ns"], nulls_last=True)
            for ordinal, row in enumerate(ordered.iter_rows(named=True)):
                number = row["seq"] if by_seq else ordinal
                keys[(rank, row["start_ns"], row["end_ns"])] = (group, number)
    return keys


def place_queue(
    b: GraphBuilder,
    queue_events: list[tuple[int, int, int, int | None]],
    *,
    other_queues: dict | None,
    labels: list[str | None] | None = None,
) -> None:
    """Place the events of one queue (stream, or gloo thread): start after the predecessor's end,
    after the launch instant plus a delay, and after inferred cross-queue work.

    queue_events: (start node, end node, queue id, launch node or None), in start order per queue.
    The delay is the event's own measured launch-to-start delay when the queue was free at launch,
    else the rank's median of those; what no dependency explains is kept as a residual. `labels`:
    each event's name, the op of its edges on a critical path.
    """
    free_delays = []
    for i, (start, _, queue, launch) in enumerate(queue_events):
        if launch is None:
            continue
        prev = queue_events[i - 1] if i and queue_events[i - 1][2] == queue else None
        if prev is None or b.measured(prev[1]) <= b.measured(launch):
            free_delays.append(b.measured(start) - b.measured(launch))
    typical = max(0.0, median(free_delays)) if free_delays else 0.0
    for i, (start, _, queue, launch) in enumerate(queue_events):
        s = b.measured(start)
        prev = queue_events[i - 1] if i and queue_events[i - 1][2] == queue else None
        ready = []  # (node, fixed weight before the residual, segment kind)
        if prev is not None:
            ready.append((prev[1], 0.0, Segment.RESIDUAL))
        if launch is not None:
            free = prev is None or b.measured(prev[1]) <= b.measured(launch)
            delay = s - b.measured(launch) if free else min(typical, s - b.measured(launch))
            ready.append((launch, float(delay), Segment.LAUNCH_DELAY))
        if other_queues is not None:
            cross = _latest_other_end(other_queues, queue, s)
            bound = max((b.measured(n) + w for n, w, _ in ready), default=None)
            if (
                cross is not None
                and (bound is None or b.measured(cross) > bound)
                and s - b.measured(cross) <= CROSS_STREAM_NS
            ):
                ready.append((cross, 0.0, Segment.STREAM_WAIT))
        # A dependency measured after the event started (clock noise, overlapping records) is
        # not one: dropping it keeps the graph acyclic.
        ready = [(n, w, k) for n, w, k in ready if b.measured(n) <= s]
        if not ready:
            continue  # work launched before the trace began, first on its queue: an anchor
        residual = s - max(b.measured(n) + w for n, w, _ in ready)
        label = labels[i] if labels is not None else None
        for node, weight, kind in ready:
            b.edge(node, start, fixed=weight + residual, kind=kind, label=label)


def _latest_other_end(other_queues: dict, queue: int, at: int) -> int | None:
    """The end node, on another queue, of the latest end before `at`."""
    best = None
    for other, (ends, nodes) in other_queues.items():
        if other == queue:
            continue
        i = bisect_left(ends, at)
        if i and (best is None or ends[i - 1] > best[0]):
            best = (ends[i - 1], nodes[i - 1])
    return None if best is None else best[1]


def merged(intervals) -> tuple[list[int], list[int]]:
    """(starts, ends) of the union of [start, end) intervals, disjoint and in order."""
    starts: list[int] = []
    ends: list[int] = []
    for start, end in sorted(intervals):
        if ends and start <= ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    return starts, ends


def covered(union: tuple[list[int], list[int]], at: int) -> bool:
    """Whether `at` lies in the union `merged` returned."""
    i = bisect_right(union[0], at) - 1
    return i >= 0 and at < union[1][i]
