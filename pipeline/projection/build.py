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

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from tracehouse.pipeline.projection.context import Instances, RankWindows, RunContext, instance_keys
from tracehouse.pipeline.projection.cpu_rank import add_cpu_rank
from tracehouse.pipeline.projection.efficiency import Curve
from tracehouse.pipeline.projection.gpu_rank import add_gpu_rank
from tracehouse.pipeline.projection.graph import Cost, GraphBuilder, ReplayGraph, Segment
from tracehouse.pipeline.projection.layouts import Pipeline, data_parallel_kind
from tracehouse.pipeline.projection.timeline import RunTimeline


@dataclass(frozen=True)
class RunGraph:
    """The replay graph of a run, its collective instances and its step windows."""

    graph: ReplayGraph
    instances: Instances
    transfer_ns: np.ndarray
    windows: list[RankWindows]
    intervals: list[tuple[int, int, int, str, str | None]]  # rank, start node, end node, class, dim
    kind: str | None = None  # the data-parallel kind planned in place of the run's own (None: as measured)
    tp: int | None = None  # the tensor-parallel degree planned on a run without (None: as measured)
    curves: dict[int, Curve] = field(default_factory=dict)  # split ops' time at a new size (efficiency.py)
    pipeline: Pipeline | None = None  # the pipeline replayed from a run without one (stages.py)
    tokens_scale: float = 1.0  # the tokens per device its work was built for, over the measured run's

    @cached_property
    def interval_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`intervals` as arrays (rank, start node, end node, class, dim), read vectorised."""
        columns = list(zip(*self.intervals, strict=True)) or [(), (), (), (), ()]
        rank, start, end, klass, dim = columns
        nodes = [np.array(c, dtype=np.int64) for c in (rank, start, end)]
        return (*nodes, np.array(klass, dtype=object), np.array(dim, dtype=object))

    @cached_property
    def planned(self) -> np.ndarray:
        """Per instance: whether it was planned (synthetic.py), not measured."""
        mask = np.zeros(len(self.transfer_ns), dtype=bool)
        mask[[i for key, i in self.instances.key_index.items() if key[0] == "synthetic"]] = True
        return mask

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
        start, end = self.window_nodes(times, rank, step)
        return times[start], times[end]

    def window_nodes(self, times: np.ndarray, rank: int, step: int | None) -> tuple[int, int]:
        """The nodes whose times open and close one rank's window (`window_bounds`)."""
        w = next(w for w in self.windows if w.rank == rank)
        i = w.steps.index(step)
        start = min(w.starts[i], key=lambda n: times[n])
        if w.ends[i] is not None:
            return start, w.ends[i]
        if i + 1 < len(w.steps):
            return start, min(w.starts[i + 1], key=lambda n: times[n])
        return start, max(w.last_ends, key=lambda n: times[n])


def build_run_graph(timeline: RunTimeline, kind: str | None = None, tp: int | None = None) -> RunGraph:
    """The whole run's graph: every rank, joined at its collectives; with the collectives of
    data-parallel `kind` ("ddp", "fsdp") planned on its CPU ranks where it is not the run's own
    (synthetic.py; a projection drops the measured ones), and those of a `tp`-way tensor-parallel
    split of a run without one."""
    ctx = RunContext(GraphBuilder(), timeline, keys=instance_keys(timeline.comm))
    windows = [add_gpu_rank(ctx, rank) for rank in timeline.gpu_ranks]
    windows += [add_cpu_rank(ctx, rank, kind, tp) for rank in timeline.cpu_ranks]
    join_instances(ctx.b, ctx.instances, timeline.clock_offsets_ns())
    graph = ctx.b.freeze()
    instances, intervals = ctx.instances, ctx.intervals
    transfer = np.array(instances.transfer_ns or [0.0], dtype=np.float64)
    return RunGraph(
        graph=graph,
        instances=instances,
        transfer_ns=transfer,
        windows=windows,
        intervals=intervals,
        kind=kind if kind is not None and kind != data_parallel_kind(timeline.facts.strategy) else None,
        tp=tp,
    )


def join_instances(b: GraphBuilder, instances: Instances, offsets: dict[int, int]) -> None:
    """One arrival node per instance: the last member's start on the reference host's clock (each
    start less its host's estimated offset, so a host whose clock runs ahead does not always look
    last); each member's end after it, its residual measured on its own clock."""
    for i, members in enumerate(instances.members):
        arrival = b.node(max(b.measured(start) - offsets.get(rank, 0) for rank, start, _ in members), -1)
        instances.arrival.append(arrival)
        op = instances.op[i] or "collective"
        for rank, start, _ in members:
            b.edge(start, arrival, fixed=-offsets.get(rank, 0), kind=Segment.WAIT, label=op)
        transfer = instances.transfer_ns[i]
        for _, start, end in members:
            rho = b.measured(end) - b.measured(arrival) - transfer
            b.edge(arrival, end, fixed=rho, cost=Cost.TRANSFER, instance=i, kind=Segment.TRANSFER, label=op)
            b.edge(start, end, kind=Segment.TRANSFER, label=op)
