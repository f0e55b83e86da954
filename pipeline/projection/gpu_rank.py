"""One GPU rank in the replay graph: host runtime calls in one chain, device work queued per
stream after its launch, synchronising calls waiting for the device (docs/projection.md)."""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from statistics import median

import polars as pl
from tracehouse.pipeline.common.kernel_classes import is_matmul_kernel
from tracehouse.pipeline.projection.context import RankWindows, RunContext, covered, merged, place_queue
from tracehouse.pipeline.projection.graph import Cost, GraphBuilder, Phase, Segment
from tracehouse.pipeline.projection.timeline import RunTimeline

# Host runtime calls that block until device work is done: by name, case-insensitive. Only
# synchronous copies block (cudaMemcpy, cuMemcpyDtoH_v2, hipMemcpy); an *Async copy only enqueues.
SYNC_CALL = re.compile(r"synchroniz|memcpy(?!\w*async)", re.IGNORECASE)
DEVICE_WIDE_SYNC = re.compile(r"(device|ctx|context)synchroniz", re.IGNORECASE)
# Calls that enqueue device work and block while the launch queue is full (cudaLaunchKernel,
# cuLaunchKernel, hipExtModuleLaunchKernel, cudaGraphLaunch); a host function is not queued work.
LAUNCH_CALL = re.compile(r"launch(?!hostfunc)", re.IGNORECASE)
# A launch queue is only inferred where at least this much work was ever outstanding at a launch
# (below it, a long launch is host time, not back-pressure).
MIN_QUEUE = 2


def add_gpu_rank(ctx: RunContext, rank: int) -> RankWindows:
    """Add one GPU rank's host chain and device queues to the graph; its windows."""
    b, t = ctx.b, ctx.timeline
    calls = t.runtime.filter(pl.col("rank") == rank)
    starts = calls["start_ns"].to_list()
    ends = calls["end_ns"].to_list()
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
    names = calls["name"].to_list()
    previous = None
    for when, _, i, is_end in points:
        is_start = not is_end
        node = call_start[i] if is_start else call_end[i]
        if is_start and previous is not None:
            b.edge(previous[1], node, fixed=when - previous[0], kind=Segment.HOST_GAP, label=names[i])
        previous = (when, node)

    dev = t.device.filter(pl.col("rank") == rank)
    optimizer = merged(t.optimizer.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows())
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
    place_queue(b, events, other_queues=other, labels=[row["name"] for row, *_ in device_nodes])

    for row, s_node, e_node, call in device_nodes:
        duration = row["end_ns"] - row["start_ns"]
        launch_at = starts[call] if call is not None else None
        phase = Phase.OPTIMIZER if launch_at is not None and covered(optimizer, launch_at) else Phase.STEP
        if row["class"] == "comm":
            comm = comm_rows.get((row["start_ns"], row["end_ns"], row["name"]))
            ctx.comm_end(rank, s_node, e_node, duration, comm)
            ctx.intervals.append((rank, s_node, e_node, "comm", comm["parallel_dim"] if comm else "unknown"))
            continue
        ctx.intervals.append(
            (rank, s_node, e_node, "memory" if row["class"] == "memory" else "compute", None)
        )
        if row["class"] == "memory":
            b.edge(
                s_node,
                e_node,
                base=duration,
                cost=Cost.MEMORY,
                phase=phase,
                kind=Segment.COPY,
                label=row["name"],
                op_id=row["launch_op_id"],
            )
        else:
            cost = Cost.COMPUTE_MATMUL if is_matmul_kernel(row["name"]) else Cost.COMPUTE_OTHER
            b.edge(
                s_node,
                e_node,
                base=duration,
                cost=cost,
                phase=phase,
                kind=Segment.COMPUTE,
                label=row["name"],
                op_id=row["launch_op_id"],
            )

    _host_durations(b, calls, call_start, call_end, device_nodes)
    return _gpu_windows(t, rank, device_nodes, starts)


def _host_durations(
    b: GraphBuilder, calls: pl.DataFrame, call_start: list[int], call_end: list[int], device_nodes: list
) -> None:
    """Each host call lasts its measured duration, except a call that waited for the device: a
    synchronising call ends `tail` after the latest device work it waited for (tail measured from
    that work's end); a launch blocked on a full launch queue ends `tail` after the work whose end
    freed a slot, and at least its unblocked cost after its start."""
    starts = calls["start_ns"].to_list()
    ends = calls["end_ns"].to_list()
    names = calls["name"].to_list()
    by_end = sorted((row["end_ns"], i) for i, (row, *_rest) in enumerate(device_nodes))
    end_times = [e for e, _ in by_end]
    streams: dict[int, list[int]] = defaultdict(list)  # stream -> device indices in start order
    for i, (row, *_rest) in enumerate(device_nodes):
        streams[row["stream"]].append(i)
    queue = LaunchQueue.of(starts, ends, names, device_nodes, end_times)
    for i, name in enumerate(names):
        s, e = starts[i], ends[i]
        awaited = []
        is_launch = bool(name and LAUNCH_CALL.search(name))
        freed = queue.freed_by(i, s, e, end_times, by_end, device_nodes, starts) if is_launch else None
        if freed is not None:
            cost = min(queue.unblocked_ns, e - s)
            b.edge(call_start[i], call_end[i], fixed=cost, kind=Segment.HOST, label=name)
            tail = e - device_nodes[freed][0]["end_ns"]
            b.edge(device_nodes[freed][2], call_end[i], fixed=tail, kind=Segment.SYNC_TAIL, label=name)
            continue
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
                    [_stream_last(device_nodes, streams[q], starts, s, e) for q in streams]
                    if wide
                    else [
                        _stream_last(device_nodes, streams[device_nodes[latest][0]["stream"]], starts, s, e)
                    ]
                )
                awaited = [j for j in chosen if j is not None] or [latest]
        if not awaited:
            b.edge(call_start[i], call_end[i], fixed=e - s, kind=Segment.HOST, label=name)
            continue
        done = max(device_nodes[j][0]["end_ns"] for j in awaited)
        tail = e - done
        b.edge(call_start[i], call_end[i], fixed=tail, kind=Segment.SYNC_TAIL, label=name)
        for j in awaited:
            b.edge(device_nodes[j][2], call_end[i], fixed=tail, kind=Segment.SYNC_TAIL, label=name)


@dataclass(frozen=True)
class LaunchQueue:
    """The rank's launch queue as the trace shows it: its capacity is the most device work ever
    launched and not yet finished at a launch call's start; a launch that starts at capacity, lasts
    more than twice an unblocked launch and returns after launched work finished was blocked until
    that work freed a slot."""

    capacity: int
    at_start: list[int]  # per host call: launched, unfinished device work at its start
    unblocked_ns: int  # the median duration of launch calls made below capacity

    @staticmethod
    def of(
        starts: list[int], ends: list[int], names: list, device_nodes: list, end_times: list[int]
    ) -> LaunchQueue:
        """Outstanding work at each call's start (launched before it, not ended by it)."""
        launched = sorted(starts[n[3]] for n in device_nodes if n[3] is not None)
        at_start = [bisect_left(launched, s) - bisect_right(end_times, s) for s in starts]
        launches = [i for i, name in enumerate(names) if name and LAUNCH_CALL.search(name)]
        capacity = max((at_start[i] for i in launches), default=0)
        free = [i for i in launches if at_start[i] < capacity] or launches
        unblocked = int(median(ends[i] - starts[i] for i in free)) if free else 0
        return LaunchQueue(capacity, at_start, unblocked)

    def freed_by(
        self,
        i: int,
        s: int,
        e: int,
        end_times: list[int],
        by_end: list,
        device_nodes: list,
        starts: list[int],
    ) -> int | None:
        """The device work whose end let launch call i (at capacity) return, or None if not blocked:
        the latest-ending work launched before the call that ended inside it."""
        if self.capacity < MIN_QUEUE or self.at_start[i] < self.capacity or e - s <= 2 * self.unblocked_ns:
            return None  # no queue, not full, or as quick as an unblocked launch
        for _, j in reversed(by_end[bisect_right(end_times, s) : bisect_right(end_times, e)]):
            call = device_nodes[j][3]
            if call is not None and starts[call] < s:
                return j
        return None


def _stream_last(device_nodes: list, indices: list[int], starts: list[int], s: int, e: int) -> int | None:
    """The last device event of one stream launched before `s` that ended by `e` (None if none)."""
    best = None
    for j in indices:
        row, _, _, call = device_nodes[j]
        if call is not None and starts[call] < s and row["end_ns"] <= e and row["end_ns"] > s:
            best = j
    return best


def _gpu_windows(t: RunTimeline, rank: int, device_nodes: list, launch_starts: list[int]) -> RankWindows:
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
