"""One CPU-only (gloo) rank in the replay graph: the main thread as a chain of pieces, its
communication spans queued per thread, and the data-parallel collectives planned where the trace
shows none (a one-rank data-parallel run, a change of data-parallel kind; docs/projection.md)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import polars as pl
from tracehouse.pipeline.projection.context import RankWindows, RunContext, covered, merged, place_queue
from tracehouse.pipeline.projection.efficiency import CLASS_OF
from tracehouse.pipeline.projection.graph import Cost, Phase, Segment
from tracehouse.pipeline.projection.synthetic import Synthetic, planned_collectives, planned_tp_collectives

# A main-thread piece that ends at most this long after a communication span ended waited for it.
CPU_WAIT_NS = 200_000


def add_cpu_rank(ctx: RunContext, rank: int, kind: str | None = None, tp: int | None = None) -> RankWindows:
    """Add one CPU rank's main-thread chain and communication spans to the graph, with the
    collectives of data-parallel `kind` planned where it is not the run's own, and those of a
    `tp`-way tensor-parallel split where the run has none; its windows."""
    b, t = ctx.b, ctx.timeline
    steps = t.steps.filter(pl.col("rank") == rank).sort("start_ns")
    compute = t.cpu_compute.filter(pl.col("rank") == rank)
    segments = list(compute.select(["start_ns", "end_ns"]).iter_rows())
    segment_ops = compute["name"].to_list()
    split_ops = t.counted_ops.filter(
        (pl.col("rank") == rank) & pl.col("name").is_in(list(CLASS_OF)) & (pl.col("flops") > 0)
    )
    splits = {
        op_id: (CLASS_OF[name], float(flops))
        for op_id, name, flops in split_ops.select(["op_id", "name", "flops"]).iter_rows()
    }
    segment_splits = [splits.get(op_id) for op_id in compute["op_id"].to_list()]
    optimizer = merged(t.optimizer.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows())
    hooks = merged(t.fsdp_hooks.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows())
    spans = t.comm.filter((pl.col("rank") == rank) & (pl.col("rule") == "cpu")).sort(["tid", "start_ns"])
    planned = planned_collectives(t, rank, segments, steps, spans, kind)
    if tp is not None:
        planned += planned_tp_collectives(t, rank, steps, tp)
    instants = sorted(
        {x for s, e in segments for x in (s, e)}
        | {x for s, e in steps.select(["start_ns", "end_ns"]).iter_rows() for x in (s, e)}
        | {x for item in planned for x in (item.issue_ns, item.wait_ns)}
    )
    nodes = [b.node(x, rank) for x in instants]
    # Where the main thread waits for a planned collective it leaves from a second node at the same
    # instant, which the collective's end gates: the wait is a step of its own, not the piece before it.
    leave = list(nodes)
    for x in sorted({max(item.issue_ns, item.wait_ns) for item in planned}):
        i = bisect_left(instants, x)
        leave[i] = b.node(x, rank)
        b.edge(nodes[i], leave[i], kind=Segment.SYNC_TAIL)
    seg_starts = [s for s, _ in segments]
    # Communication spans, queued per thread, issued from the main-thread instant before them.
    span_rows = list(spans.iter_rows(named=True))
    span_nodes = [(b.node(r["start_ns"], rank), b.node(r["end_ns"], rank)) for r in span_rows]
    queue_events = []
    for r, (s_node, e_node) in zip(span_rows, span_nodes, strict=True):
        at = bisect_right(instants, r["start_ns"]) - 1
        queue_events.append((s_node, e_node, hash(r["tid"]), leave[at] if at >= 0 else None))
    place_queue(b, queue_events, other_queues=None, labels=[r["name"] for r in span_rows])
    for r, (s_node, e_node) in zip(span_rows, span_nodes, strict=True):
        ctx.comm_end(rank, s_node, e_node, r["end_ns"] - r["start_ns"], r)
        ctx.intervals.append((rank, s_node, e_node, "comm", r["parallel_dim"]))
    span_ends = sorted((r["end_ns"], e) for r, (_, e) in zip(span_rows, span_nodes, strict=True))
    end_times = [x for x, _ in span_ends]
    # The main thread's chain of pieces.
    for i in range(len(instants) - 1):
        a, z = instants[i], instants[i + 1]
        k = bisect_right(seg_starts, a) - 1
        hook = Phase.FSDP_HOOK if covered(hooks, a) else Phase.STEP
        if k >= 0 and segments[k][0] <= a and z <= segments[k][1]:
            phase = Phase.OPTIMIZER if covered(optimizer, a) else hook
            b.edge(
                leave[i],
                nodes[i + 1],
                base=z - a,
                cost=Cost.COMPUTE_OTHER,
                phase=phase,
                kind=Segment.COMPUTE,
                label=segment_ops[k],
                split=segment_splits[k],
            )
            ctx.intervals.append((rank, leave[i], nodes[i + 1], "compute", None))
            continue
        j = waited_for(end_times, a, z)
        if j is not None:
            tail = z - end_times[j]
            b.edge(leave[i], nodes[i + 1], fixed=tail, kind=Segment.SYNC_TAIL, phase=hook)
            b.edge(span_ends[j][1], nodes[i + 1], fixed=tail, kind=Segment.SYNC_TAIL)
        else:
            b.edge(leave[i], nodes[i + 1], fixed=z - a, kind=Segment.HOST_GAP, phase=hook)
    index = {x: n for x, n in zip(instants, nodes, strict=True)}
    _add_synthetic(ctx, rank, planned, instants, (nodes, leave), tp)
    rows = list(steps.select(["step", "start_ns", "end_ns"]).iter_rows())
    return RankWindows(
        rank,
        [step for step, _, _ in rows],
        [[index[s]] for _, s, _ in rows],
        [],
        [index[e] for _, _, e in rows],
    )


def waited_for(end_times: list[int], a: int, z: int) -> int | None:
    """The index of the communication span (of the sorted end times) that a main-thread piece [a,
    z) waited for: the last ending inside it, at most CPU_WAIT_NS before the piece ends."""
    j = bisect_right(end_times, z) - 1
    return j if j >= 0 and end_times[j] > a and z - end_times[j] <= CPU_WAIT_NS else None


def _add_synthetic(
    ctx: RunContext,
    rank: int,
    planned: list[Synthetic],
    instants: list[int],
    nodes: tuple[list[int], list[int]],
    tp_new: int | None = None,
) -> None:
    """Each planned collective: a data-parallel instance whose members are the ranks that plan it
    (its measured transfer is zero), queued after the previous one on the rank, issued at its
    instant; the main thread leaves the instant it is awaited at (its issue instant when it blocks)
    only once it ended. `nodes`: each instant's node and the node the main thread leaves it from;
    `tp_new`: the tensor-parallel degree planned, which sets the data-parallel groups."""
    b = ctx.b
    facts = ctx.timeline.facts
    previous_end: dict[str, int] = {}  # per parallel dimension: its queue's last planned end
    for item in sorted(planned, key=lambda p: p.issue_ns):
        # its group (synthetic.py): a tensor-parallel one of consecutive ranks, a data-parallel
        # one of the ranks holding the same model-parallel part (tensor-parallel shard at tp_new
        # where it is planned, pipeline stage)
        if item.dim == "tp":
            group = rank // item.group_size
        else:
            group = rank % ((tp_new or facts.tp or 1) * (facts.pp or 1))
        issue = nodes[0][bisect_left(instants, item.issue_ns)]
        wait = nodes[1][bisect_left(instants, max(item.issue_ns, item.wait_ns))]
        start = b.node(item.issue_ns, rank)
        end = b.node(item.issue_ns, rank)
        b.edge(issue, start, kind=Segment.LAUNCH_DELAY, label=item.op)
        if item.dim in previous_end:
            b.edge(previous_end[item.dim], start, kind=Segment.LAUNCH_DELAY, label=item.op)
        row = {
            "transfer_ns": 0.0,
            "op": item.op,
            "bytes": item.bytes,
            "dtype": facts.dtype,
            "group_size": item.group_size or facts.data_parallel,
            "parallel_dim": item.dim,
        }
        i = ctx.instances.add(("synthetic", group, *item.key), row)
        ctx.instances.members[i].append((rank, start, end))
        b.edge(end, wait, kind=Segment.SYNC_TAIL, label=item.op)
        ctx.intervals.append((rank, start, end, "comm", item.dim))
        previous_end[item.dim] = end
