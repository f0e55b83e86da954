"""Build the replay graph of one run from its timeline (the rules are in docs/projection.md).

GPU ranks: host runtime calls in one chain per rank (each call starts after the instant before
it, on any host thread, with the measured gap; it lasts its measured duration, except a
synchronising call, which ends `tail` after the device work it waited for); each kernel or copy
starts after its stream predecessor, after its launch plus a launch delay, and, where the
measurement shows it started right after work on another stream ended, after that work.
CPU ranks: the main thread as a chain of pieces (compute self time, which scales, and the rest,
which does not, except a piece that ends just after a communication span it waited for); each
`gloo:*` span is queued on its thread like a kernel on a stream, issued from the main thread.
Collectives: a matched instance's transfer starts when the last rank of its group arrives.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import median

import numpy as np
import polars as pl
from tracehouse.pipeline.projection.graph import Cost, GraphBuilder, Phase, ReplayGraph
from tracehouse.pipeline.projection.synthetic import Synthetic, one_device_collectives
from tracehouse.pipeline.projection.timeline import RunTimeline

# A kernel that starts at most this long after work on another stream ended waits for that work
# (the trace records no cross-stream dependency the warehouse keeps; see docs/projection.md).
CROSS_STREAM_NS = 10_000
# A main-thread piece that ends at most this long after a communication span ended waited for it.
CPU_WAIT_NS = 200_000
# Host runtime calls that block until device work is done: by name, case-insensitive.
SYNC_CALL = re.compile(r"synchroniz|memcpy", re.IGNORECASE)
DEVICE_WIDE_SYNC = re.compile(r"(device|ctx|context)synchroniz", re.IGNORECASE)
# Kernels of the tensor-core class a scenario may speed up apart from the rest.
MATMUL_KERNEL = re.compile(
    r"gemm|matmul|mma|cutlass|cublas|attention|attn|flash|fmha|sdpa|conv", re.IGNORECASE
)


@dataclass
class Instances:
    """Matched collective instances across the run: one arrival node each."""

    key_index: dict[tuple, int] = field(default_factory=dict)
    transfer_ns: list[float] = field(default_factory=list)
    op: list[str | None] = field(default_factory=list)
    bytes: list[int | None] = field(default_factory=list)
    group_size: list[int | None] = field(default_factory=list)
    dim: list[str] = field(default_factory=list)
    members: list[list[tuple[int, int, int]]] = field(default_factory=list)  # (rank, start, end node)

    def add(self, key: tuple, row: dict) -> int:
        """The instance of `key`, added from its first member's comm_intervals row."""
        if key not in self.key_index:
            self.key_index[key] = len(self.transfer_ns)
            self.transfer_ns.append(float(row["transfer_ns"]))
            self.op.append(row["op"])
            self.bytes.append(row["bytes"])
            self.group_size.append(row["group_size"])
            self.dim.append(row["parallel_dim"])
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


@dataclass(frozen=True)
class RunGraph:
    """The replay graph of a run, its collective instances and its step windows."""

    graph: ReplayGraph
    instances: Instances
    transfer_ns: np.ndarray
    windows: list[RankWindows]
    intervals: list[tuple[int, int, int, str, str | None]]  # rank, start node, end node, class, dim

    def step_times(self, times: np.ndarray) -> dict[int | None, dict[int, float]]:
        """Per step, per rank: the window length in µs."""
        out: dict[int | None, dict[int, float]] = defaultdict(dict)
        for w in self.windows:
            for step in w.steps:
                start, end = self.window_bounds(times, w.rank, step)
                out[step][w.rank] = (end - start) / 1000.0
        return dict(out)

    def window_bounds(self, times: np.ndarray, rank: int, step: int | None) -> tuple[float, float]:
        """The [start, end) of one rank's window (ns) in the given times: a GPU window opens at the
        first start of its step's events and closes where the next one opens (the last at the last
        end of its own events); a CPU window is its ProfilerStep's own start and end."""
        w = next(w for w in self.windows if w.rank == rank)
        i = w.steps.index(step)
        start = min(times[n] for n in w.starts[i])
        if w.ends[i] is not None:
            return start, times[w.ends[i]]
        if i + 1 < len(w.steps):
            return start, min(times[n] for n in w.starts[i + 1])
        return start, max(times[n] for n in w.last_ends)


def build_run_graph(timeline: RunTimeline) -> RunGraph:
    """The whole run's graph: every rank, joined at its collectives."""
    b = GraphBuilder()
    instances = Instances()
    keys = instance_keys(timeline.comm)
    windows = []
    intervals: list[tuple[int, int, int, str, str | None]] = []
    for rank in timeline.gpu_ranks:
        windows.append(_gpu_rank(b, timeline, rank, instances, keys, intervals))
    for rank in timeline.cpu_ranks:
        windows.append(_cpu_rank(b, timeline, rank, instances, keys, intervals))
    _join_instances(b, instances)
    graph = b.freeze()
    transfer = np.array(instances.transfer_ns or [0.0], dtype=np.float64)
    return RunGraph(
        graph=graph, instances=instances, transfer_ns=transfer, windows=windows, intervals=intervals
    )


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


def _join_instances(b: GraphBuilder, instances: Instances) -> None:
    """One arrival node per instance (the last member's start); each member's end after it."""
    for i, members in enumerate(instances.members):
        arrival = b.node(max(b.measured(start) for _, start, _ in members), -1)
        for _, start, _ in members:
            b.edge(start, arrival)
        transfer = instances.transfer_ns[i]
        for _, start, end in members:
            rho = b.measured(end) - b.measured(arrival) - transfer
            b.edge(arrival, end, fixed=rho, cost=Cost.TRANSFER, instance=i)
            b.edge(start, end)


def _queue(
    b: GraphBuilder,
    queue_events: list[tuple[int, int, int, int | None]],
    *,
    other_queues: dict | None,
) -> None:
    """Place the events of one queue (stream, or gloo thread): start after the predecessor's end,
    after the launch instant plus a delay, and after inferred cross-queue work.

    queue_events: (start node, end node, queue id, launch node or None), in start order per queue.
    The delay is the event's own measured launch-to-start delay when the queue was free at launch,
    else the rank's median of those; what no dependency explains is kept as a residual.
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
        ready = []  # (node, fixed weight before the residual)
        if prev is not None:
            ready.append((prev[1], 0.0))
        if launch is not None:
            free = prev is None or b.measured(prev[1]) <= b.measured(launch)
            delay = s - b.measured(launch) if free else min(typical, s - b.measured(launch))
            ready.append((launch, float(delay)))
        if other_queues is not None:
            cross = _latest_other_end(other_queues, queue, s)
            bound = max((b.measured(n) + w for n, w in ready), default=None)
            if (
                cross is not None
                and (bound is None or b.measured(cross) > bound)
                and s - b.measured(cross) <= CROSS_STREAM_NS
            ):
                ready.append((cross, 0.0))
        # A dependency measured after the event started (clock noise, overlapping records) is
        # not one: dropping it keeps the graph acyclic.
        ready = [(n, w) for n, w in ready if b.measured(n) <= s]
        if not ready:
            continue  # work launched before the trace began, first on its queue: an anchor
        residual = s - max(b.measured(n) + w for n, w in ready)
        for node, weight in ready:
            b.edge(node, start, fixed=weight + residual)


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


def _inside(intervals: list[tuple[int, int]], at: int) -> bool:
    """Whether `at` lies in one of the sorted [start, end) intervals (which may nest)."""
    return any(start <= at < end for start, end in intervals)


def _gpu_rank(
    b: GraphBuilder, t: RunTimeline, rank: int, instances: Instances, keys: dict, intervals: list
) -> RankWindows:
    calls = t.runtime.filter(pl.col("rank") == rank)
    starts = calls["start_ns"].to_list()
    ends = calls["end_ns"].to_list()
    names = calls["name"].to_list()
    call_start = [b.node(s, rank) for s in starts]
    call_end = [b.node(e, rank) for e in ends]
    launch_of: dict[int, int] = {}
    for i, corr in enumerate(calls["correlation"].to_list()):
        if corr is not None and corr not in launch_of:
            launch_of[corr] = i
    # The host chain: each call starts after the instant just before it (ends first at a tie).
    # (A call of zero duration keeps its start before its end.)
    points = sorted(
        [(e, int(e == s), i, 1) for i, (s, e) in enumerate(zip(starts, ends, strict=True))]
        + [(s, 1, i, 0) for i, s in enumerate(starts)]
    )
    previous = None
    for when, _, i, is_end in points:
        is_start = not is_end
        node = call_start[i] if is_start else call_end[i]
        if is_start and previous is not None:
            b.edge(previous[1], node, fixed=when - previous[0])
        previous = (when, node)

    dev = t.device.filter(pl.col("rank") == rank)
    optimizer = [
        (s, e)
        for s, e in t.optimizer.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows()
    ]
    comm_rows = {
        (r["start_ns"], r["end_ns"], r["name"]): r
        for r in t.comm.filter(pl.col("rank") == rank).iter_rows(named=True)
    }
    events = []
    by_stream_ends: dict[int, list[tuple[int, int]]] = defaultdict(list)
    device_nodes = []
    for row in dev.iter_rows(named=True):
        s_node = b.node(row["start_ns"], rank)
        e_node = b.node(row["end_ns"], rank)
        call = launch_of.get(row["correlation"]) if row["correlation"] is not None else None
        events.append((s_node, e_node, row["stream"], call_start[call] if call is not None else None))
        by_stream_ends[row["stream"]].append((row["end_ns"], e_node))
        device_nodes.append((row, s_node, e_node, call))
    other = {q: ([e for e, _ in sorted(v)], [n for _, n in sorted(v)]) for q, v in by_stream_ends.items()}
    _queue(b, events, other_queues=other)

    for row, s_node, e_node, call in device_nodes:
        duration = row["end_ns"] - row["start_ns"]
        launch_at = starts[call] if call is not None else None
        phase = Phase.OPTIMIZER if launch_at is not None and _inside(optimizer, launch_at) else Phase.STEP
        if row["class"] == "comm":
            comm = comm_rows.get((row["start_ns"], row["end_ns"], row["name"]))
            _comm_end(b, rank, s_node, e_node, duration, comm, instances, keys)
            intervals.append((rank, s_node, e_node, "comm", comm["parallel_dim"] if comm else "unknown"))
            continue
        intervals.append((rank, s_node, e_node, "memory" if row["class"] == "memory" else "compute", None))
        if row["class"] == "memory":
            b.edge(s_node, e_node, base=duration, cost=Cost.MEMORY, phase=phase)
        else:
            cost = Cost.COMPUTE_MATMUL if MATMUL_KERNEL.search(row["name"] or "") else Cost.COMPUTE_OTHER
            b.edge(s_node, e_node, base=duration, cost=cost, phase=phase)

    _host_durations(b, calls, names, call_start, call_end, device_nodes, launch_of)
    return _gpu_windows(t, rank, device_nodes, starts)


def _host_durations(b, calls, names, call_start, call_end, device_nodes, launch_of) -> None:
    """Each host call lasts its measured duration, except a synchronising call that waited: it ends
    `tail` after the latest device work it waited for (tail measured from that work's end)."""
    starts = calls["start_ns"].to_list()
    ends = calls["end_ns"].to_list()
    by_end = sorted((row["end_ns"], i) for i, (row, *_rest) in enumerate(device_nodes))
    end_times = [e for e, _ in by_end]
    streams: dict[int, list[int]] = defaultdict(list)  # stream -> device indices in start order
    for i, (row, *_rest) in enumerate(device_nodes):
        streams[row["stream"]].append(i)
    for i, name in enumerate(names):
        s, e = starts[i], ends[i]
        awaited = []
        if name and SYNC_CALL.search(name):
            lo, hi = bisect_right(end_times, s), bisect_right(end_times, e)
            launched_before = [
                j
                for _, j in by_end[lo:hi]
                if device_nodes[j][3] is not None and starts[device_nodes[j][3]] < s
            ]
            if launched_before:
                latest = max(launched_before, key=lambda j: device_nodes[j][0]["end_ns"])
                wide = DEVICE_WIDE_SYNC.search(name) is not None
                chosen = (
                    [streams_last(device_nodes, streams[q], starts, s, e) for q in streams]
                    if wide
                    else [
                        streams_last(device_nodes, streams[device_nodes[latest][0]["stream"]], starts, s, e)
                    ]
                )
                awaited = [j for j in chosen if j is not None] or [latest]
        if not awaited:
            b.edge(call_start[i], call_end[i], fixed=e - s)
            continue
        done = max(device_nodes[j][0]["end_ns"] for j in awaited)
        tail = e - done
        b.edge(call_start[i], call_end[i], fixed=tail)
        for j in awaited:
            b.edge(device_nodes[j][2], call_end[i], fixed=tail)


def streams_last(device_nodes, indices: list[int], starts: list[int], s: int, e: int) -> int | None:
    """The last device event of one stream launched before `s` that ended by `e` (None if none)."""
    best = None
    for j in indices:
        row, _, _, call = device_nodes[j]
        if call is not None and starts[call] < s and row["end_ns"] <= e and row["end_ns"] > s:
            best = j
    return best


def _gpu_windows(t: RunTimeline, rank: int, device_nodes, launch_starts: list[int]) -> RankWindows:
    """METHODOLOGY's GPU windows: a step opens at the first start of its GPU events (by launch)."""
    steps = t.steps.filter(pl.col("rank") == rank).sort("start_ns")
    spans = list(steps.select(["step", "start_ns", "end_ns"]).iter_rows())
    all_ends = [n[2] for n in device_nodes]
    if not spans:
        return RankWindows(rank, [None], [[n[1] for n in device_nodes]], all_ends, [None])
    members: dict[int, list[int]] = defaultdict(list)
    last_ends: dict[int, list[int]] = defaultdict(list)
    for _row, s_node, e_node, call in device_nodes:
        if call is None:
            continue
        at = launch_starts[call]
        for step, start, end in spans:
            if start <= at < end:
                members[step].append(s_node)
                last_ends[step].append(e_node)
                break
    ordered = [step for step, _, _ in spans if members.get(step)]
    return RankWindows(
        rank,
        ordered,
        [members[s] for s in ordered],
        last_ends[ordered[-1]] if ordered else [],
        [None] * len(ordered),
    )


def _comm_end(b, rank, s_node, e_node, duration, comm, instances: Instances, keys: dict) -> None:
    """A communication interval's end: its instance's arrival plus transfer, else its own duration."""
    key = None
    if comm is not None:
        key = keys.get((rank, comm["start_ns"], comm["end_ns"]))
    if key is None:
        b.edge(s_node, e_node, base=duration, cost=Cost.COMM_LOCAL)
        return
    i = instances.add(key, comm)
    instances.members[i].append((rank, s_node, e_node))


def _cpu_rank(
    b: GraphBuilder, t: RunTimeline, rank: int, instances: Instances, keys: dict, intervals: list
) -> RankWindows:
    steps = t.steps.filter(pl.col("rank") == rank).sort("start_ns")
    segments = list(t.cpu_compute.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows())
    optimizer = list(t.optimizer.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows())
    spans = t.comm.filter((pl.col("rank") == rank) & (pl.col("rule") == "cpu")).sort(["tid", "start_ns"])
    planned = one_device_collectives(t, rank, segments, steps, spans)
    instants = sorted(
        {x for s, e in segments for x in (s, e)}
        | {x for s, e in steps.select(["start_ns", "end_ns"]).iter_rows() for x in (s, e)}
        | {x for item in planned for x in (item.issue_ns, item.wait_ns)}
    )
    nodes = [b.node(x, rank) for x in instants]
    seg_starts = [s for s, _ in segments]
    # Communication spans, queued per thread, issued from the main-thread instant before them.
    span_rows = list(spans.iter_rows(named=True))
    span_nodes = [(b.node(r["start_ns"], rank), b.node(r["end_ns"], rank)) for r in span_rows]
    queue_events = []
    for r, (s_node, e_node) in zip(span_rows, span_nodes, strict=True):
        at = bisect_right(instants, r["start_ns"]) - 1
        queue_events.append((s_node, e_node, hash(r["tid"]), nodes[at] if at >= 0 else None))
    _queue(b, queue_events, other_queues=None)
    for r, (s_node, e_node) in zip(span_rows, span_nodes, strict=True):
        _comm_end(b, rank, s_node, e_node, r["end_ns"] - r["start_ns"], r, instances, keys)
        intervals.append((rank, s_node, e_node, "comm", r["parallel_dim"]))
    span_ends = sorted((r["end_ns"], e) for r, (_, e) in zip(span_rows, span_nodes, strict=True))
    end_times = [x for x, _ in span_ends]
    # The main thread's chain of pieces.
    for i in range(len(instants) - 1):
        a, z = instants[i], instants[i + 1]
        k = bisect_right(seg_starts, a) - 1
        if k >= 0 and segments[k][0] <= a and z <= segments[k][1]:
            phase = Phase.OPTIMIZER if _inside(optimizer, a) else Phase.STEP
            b.edge(nodes[i], nodes[i + 1], base=z - a, cost=Cost.COMPUTE_OTHER, phase=phase)
            intervals.append((rank, nodes[i], nodes[i + 1], "compute", None))
            continue
        j = bisect_right(end_times, z) - 1
        if j >= 0 and end_times[j] > a and z - end_times[j] <= CPU_WAIT_NS:
            tail = z - end_times[j]
            b.edge(nodes[i], nodes[i + 1], fixed=tail)
            b.edge(span_ends[j][1], nodes[i + 1], fixed=tail)
        else:
            b.edge(nodes[i], nodes[i + 1], fixed=z - a)
    index = {x: n for x, n in zip(instants, nodes, strict=True)}
    _add_synthetic(b, rank, planned, instants, nodes, instances, intervals)
    rows = list(steps.select(["step", "start_ns", "end_ns"]).iter_rows())
    return RankWindows(
        rank,
        [step for step, _, _ in rows],
        [[index[s]] for _, s, _ in rows],
        [],
        [index[e] for _, _, e in rows],
    )


def _add_synthetic(
    b: GraphBuilder,
    rank: int,
    planned: list[Synthetic],
    instants: list[int],
    nodes: list[int],
    instances: Instances,
    intervals: list,
) -> None:
    """Each planned collective: a data-parallel instance of one member (its transfer is zero on one
    device), queued after the previous one on the rank, issued at its instant; the instant it is
    awaited at waits for it (the next main-thread instant when issued and awaited at one instant)."""
    previous_end = None
    for item in sorted(planned, key=lambda p: p.issue_ns):
        i = bisect_left(instants, item.issue_ns)
        issue = nodes[i]
        k = bisect_left(instants, item.wait_ns) if item.wait_ns > item.issue_ns else i + 1
        wait = nodes[k] if k < len(nodes) else None
        start = b.node(item.issue_ns, rank)
        end = b.node(item.issue_ns, rank)
        b.edge(issue, start)
        if previous_end is not None:
            b.edge(previous_end, start)
        row = {"transfer_ns": 0.0, "op": item.op, "bytes": item.bytes, "group_size": 1, "parallel_dim": "dp"}
        i = instances.add(("synthetic", rank, *item.key), row)
        instances.members[i].append((rank, start, end))
        if wait is not None:
            b.edge(end, wait)
        intervals.append((rank, start, end, "comm", "dp"))
        previous_end = end
