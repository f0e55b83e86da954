"""A run without pipeline parallelism replayed as a pipeline: pp stages, M micro-batches, GPipe or 1F1B.

tracehouse collect's pipeline (collectors/parallel.py) cuts its reference Llama into pp stages of
consecutive blocks (`model_sizes.stage_layers`; the embedding on the first stage, the final norm and
the output on the last) and runs torch's ScheduleGPipe: every micro-batch's forward, stage after
stage, then every micro-batch's backward, then the optimizer; Schedule1F1B interleaves them
(`schedule_actions`). From a CPU run of the reference Llama
without tensor or pipeline parallelism, each step's main thread is cut where its layers' first
matmuls start (`synthetic.reference_matmuls`) into regions, each owned by the stage holding its
layer (the step's start up to the first block: the first stage; the output and the loss: the last;
the backward likewise, in reverse); the optimizer's region is shared by the stages in proportion to
their parameters. Each stage is a new rank (rank = pipeline x pp + stage, the measured rank r's
pipeline r) that replays its regions once per micro-batch:
* a compute piece of an op with counted FLOPs (matmul, attention, elementwise, norm, ...), or else
  counted bytes (fills, copies, embedding lookups), at 1/M of them, timed by the study's efficiency
  curve of its category on that measure (efficiency.category_curves; 1/M of its time where the
  category has none); every other compute piece (views, reshapes, autograd's own work: per call,
  not per token) and the host gaps in full, since every micro-batch calls each op again;
* main-thread time spent waiting for a measured collective, and FSDP's own work (its hooks), is
  dropped: the run's collectives are planned anew;
* between stages, per micro-batch, the activations (forward) and their gradients (backward) as a
  send / recv of 2 ranks (parallel dimension "pp"; tokens per micro-batch x d_model x the dtype's
  bytes): the receiver waits for the transfer, the sender for its sends where its schedule awaits
  them (GPipe: when the loop ends);
* where the run measured several data-parallel ranks, each stage's gradients in DDP's buckets across
  the pipelines' same stage, issued as its last micro-batch's backward does its share of the work,
  awaited before the optimizer (the manifest's n_params is not used: the stage's own parameters).
The replay of such a graph is no longer the measurement's: its identity check is the run's own
graph's (docs/projection.md "A change of pipeline parallelism").
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl
from tracehouse.collectors.model_sizes import stage_layers, stage_params
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.ops.costs import CATEGORY_OF, FORMULA_OF
from tracehouse.pipeline.projection.build import RunGraph, join_instances
from tracehouse.pipeline.projection.context import RankWindows, RunContext, covered, merged
from tracehouse.pipeline.projection.cpu_rank import waited_for
from tracehouse.pipeline.projection.efficiency import CLASS_OF, SPLIT_CLASSES, Curve, LatencyFit
from tracehouse.pipeline.projection.graph import Cost, GraphBuilder, Phase, Segment
from tracehouse.pipeline.projection.layouts import Pipeline
from tracehouse.pipeline.projection.synthetic import (
    BLOCK_LINEARS,
    bucket_sizes,
    reference_matmuls,
)
from tracehouse.pipeline.projection.timeline import DTYPE_BYTES, RunTimeline


@dataclass(frozen=True)
class Piece:
    """One main-thread piece of a region, as one micro-batch replays it: a compute piece's
    scalable time (ns) or a host gap's fixed time, its op and split (class code, FLOPs)."""

    ns: float
    compute: bool
    label: str | None = None
    split: tuple[int, float] | None = None  # tensor parallelism's (efficiency.SPLIT_CLASSES code, FLOPs)


@dataclass
class StepCut:
    """One measured step of one rank cut into the stages' regions."""

    step: int
    start_ns: int
    end_ns: int
    forward: list[list[Piece]]  # per stage
    backward: list[list[Piece]]  # per stage
    optimizer: list[Piece] = field(default_factory=list)  # every stage's, at the measured size

    def regions(self) -> list[list[Piece]]:
        """Every region's pieces: the stages' forward, their backward, the optimizer's."""
        return [*self.forward, *self.backward, self.optimizer]


def build_pipeline_graph(
    timeline: RunTimeline,
    pipeline: Pipeline,
    curves: dict[tuple[str, str], Curve],
    tokens_scale: float = 1.0,
) -> RunGraph:
    """The run replayed as `pipeline`: pp stages, its micro-batches in its schedule's order (module
    docstring), its ops timed by the categories' `curves`, each pipeline carrying `tokens_scale`
    times the tokens of a measured data-parallel rank (the projected layout's: a pipeline's
    micro-batches are built at the size they run, so per-call work does not follow the tokens); a
    run it cannot be planned for is a TracehouseError saying why."""
    f = timeline.facts
    name = f"{f.study}/{f.run_id}"
    pp, microbatches, schedule = pipeline
    width = DTYPE_BYTES.get(f.dtype or "fp32")
    if f.model is None or width is None or not f.tokens_per_step:
        raise TracehouseError(
            f"{name}: a change of pipeline parallelism is planned for tracehouse's reference Llama: its "
            "manifest needs a reference model_config, tokens_per_step and a known dtype"
        )
    if pp > f.model.n_layers:
        raise TracehouseError(f"{name}: pp={pp} exceeds its model's {f.model.n_layers} layers")
    tokens = round(f.tokens_per_step / f.data_parallel * tokens_scale)
    # micro-batches of whole sequences, as tracehouse collect splits them (tokens where none is known)
    count, unit = (
        (round(f.global_batch / f.data_parallel * tokens_scale), "sequences")
        if f.global_batch
        else (tokens, "tokens")
    )
    if count % microbatches or not count:
        raise TracehouseError(
            f"{name}: a pipeline's {count} {unit} a step do not split into {microbatches} micro-batches"
        )
    activation = tokens // microbatches * f.model.d_model * width
    params = [stage_params(f.model, pp, s) for s in range(pp)]
    shares = [n / sum(params) for n in params]
    plan = _Plan(pp, microbatches, schedule, activation, [n * width for n in params], shares)
    ctx = RunContext(GraphBuilder(), timeline)
    windows = []
    for rank in timeline.cpu_ranks:
        cuts = typical(cut_steps(timeline, rank, pp, microbatches / tokens_scale, curves))
        windows += [_add_stage(ctx, plan, rank, stage, cuts) for stage in range(pp)]
    join_instances(ctx.b, ctx.instances, {})
    instances = ctx.instances
    return RunGraph(
        graph=ctx.b.freeze(),
        instances=instances,
        transfer_ns=np.array(instances.transfer_ns or [0.0], dtype=np.float64),
        windows=windows,
        intervals=ctx.intervals,
        pipeline=pipeline,
        tokens_scale=tokens_scale,
    )


def cut_steps(
    t: RunTimeline, rank: int, pp: int, microbatches: float, curves: dict[tuple[str, str], Curve]
) -> list[StepCut]:
    """Each step of one rank cut into its stages' regions, each piece at a micro-batch's size: 1 /
    `microbatches` of the measured step's work (more than the pipeline's count where a pipeline
    carries fewer tokens than the measured rank)."""
    f = t.facts
    steps = t.steps.filter(pl.col("rank") == rank).sort("start_ns")
    try:
        matmuls = reference_matmuls(t, rank, steps)
    except TracehouseError as exc:
        raise TracehouseError(f"{exc}, so its layers cannot be cut into pipeline stages") from None
    layers = f.model.n_layers
    owner = [s for s in range(pp) for _ in stage_layers(layers, pp, s)]
    compute = t.cpu_compute.filter(pl.col("rank") == rank)
    counted = {
        op_id: (name, float(flops), float(size))
        for op_id, name, flops, size in t.counted_ops.filter(pl.col("rank") == rank)
        .select(["op_id", "name", "flops", "bytes"])
        .iter_rows()
    }
    segments = [
        (s, e, name, counted.get(op_id))
        for s, e, name, op_id in compute.select(["start_ns", "end_ns", "name", "op_id"]).iter_rows()
    ]
    optimizer = merged(t.optimizer.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows())
    hooks = merged(t.fsdp_hooks.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows())
    comm_ends = sorted(t.comm.filter(pl.col("rank") == rank)["end_ns"].to_list())
    out = []
    for (step, start, end), (_, forward, backward, (lo, hi)) in zip(
        steps.select(["step", "start_ns", "end_ns"]).iter_rows(), matmuls, strict=True
    ):
        # (instant, region): forward / backward regions per stage, then the optimizer's
        cuts = [(start, ("forward", 0))]
        cuts += [(forward[BLOCK_LINEARS * i][0], ("forward", owner[i])) for i in range(layers)]
        cuts += [(forward[BLOCK_LINEARS * layers][0], ("forward", pp - 1)), (lo, ("backward", pp - 1))]
        cuts += [
            (backward[2 + 2 * BLOCK_LINEARS * k][0], ("backward", owner[layers - 1 - k]))
            for k in range(layers)
        ]
        cuts.append((hi, ("optimizer", 0)))
        at = [x for x, _ in cuts]
        cut = StepCut(step, start, end, [[] for _ in range(pp)], [[] for _ in range(pp)])
        for a, z, compute_piece, label, flops in _pieces(segments, start, end):
            if covered(hooks, a) or (not compute_piece and _waits(comm_ends, a, z)):
                continue
            region, stage = cuts[max(0, bisect_right(at, a) - 1)][1]
            if region == "optimizer" or covered(optimizer, a):
                cut.optimizer.append(Piece(float(z - a), compute_piece, label))
                continue
            piece = _micro(z - a, compute_piece, label, flops, microbatches, curves)
            (cut.forward if region == "forward" else cut.backward)[stage].append(piece)
        out.append(cut)
    return out


def typical(cuts: list[StepCut]) -> list[StepCut]:
    """The cuts with each region's pieces at their median over the steps, where every step has the
    same pieces there (the same ops in the same order): a stall of one measured step (page faults,
    a collection, the optimizer's first step) is not repeated on every stage and micro-batch."""
    for runs in zip(*(cut.regions() for cut in cuts), strict=True):  # one region, step by step
        if len({tuple((p.compute, p.label) for p in pieces) for pieces in runs}) != 1:
            continue
        medians = np.median(np.array([[p.ns for p in pieces] for pieces in runs]), axis=0)
        for pieces in runs:
            pieces[:] = [replace(p, ns=float(ns)) for p, ns in zip(pieces, medians, strict=True)]
    return cuts


def _pieces(segments, start: int, end: int):
    """The main thread's pieces of [start, end): (start, end, compute?, op, (op name, counted
    FLOPs, counted bytes) or None), compute segments and the host gaps between them, in order."""
    at = start
    for s, e, label, counted in segments:
        if e <= start or s >= end:
            continue
        s, e = max(s, start), min(e, end)
        if s > at:
            yield at, s, False, None, None
        yield s, e, True, label, counted
        at = e
    if end > at:
        yield at, end, False, None, None


def _waits(comm_ends: list[int], a: int, z: int) -> bool:
    """Whether a host gap [a, z) ends just after a communication span it waited for (cpu_rank.py)."""
    return waited_for(comm_ends, a, z) is not None


def _micro(ns: int, compute: bool, label, counted, microbatches: float, curves: dict) -> Piece:
    """A piece at one micro-batch's size (module docstring); `curves`: category_curves'."""
    if not compute or counted is None:
        return Piece(float(ns), compute, label)
    name, flops, size = counted
    measure, work = ("flops", flops) if flops > 0 else ("bytes", size)
    split = (CLASS_OF[name], flops / microbatches) if name in CLASS_OF and flops > 0 else None
    category = CATEGORY_OF[FORMULA_OF[name]]
    curve = curves.get((category, measure))
    if curve is None:
        return Piece(ns / microbatches, True, label, split)
    model = curve if category in SPLIT_CLASSES and measure == "flops" else LatencyFit.of(curve)
    ratio = model.time_ratio(np.array([work]), np.array([work / microbatches]))[0]
    return Piece(ns * float(ratio), True, label, split)


@dataclass(frozen=True)
class _Plan:
    pp: int
    microbatches: int
    schedule: str  # layouts.SCHEDULES
    activation_bytes: int
    stage_bytes: list[int]  # each stage's parameters in bytes (its gradients)
    stage_shares: list[float]  # each stage's share of the parameters (of the optimizer's work)


class _Chain:
    """One new rank's main thread as it is built: its last node and a nominal time (the graph's
    `measured` times of planned nodes, used by no weight)."""

    def __init__(self, ctx: RunContext, rank: int, at: int) -> None:
        self.ctx, self.rank, self.at = ctx, rank, float(at)
        self.node = ctx.b.node(at, rank)

    def advance(self, *, fixed: float = 0.0, base: float = 0.0, **edge) -> int:
        before = self.node
        self.at += fixed + base
        self.node = self.ctx.b.node(round(self.at), self.rank)
        self.ctx.b.edge(before, self.node, fixed=fixed, base=base, **edge)
        return before

    def piece(self, piece: Piece, phase: Phase = Phase.STEP, share: float = 1.0) -> None:
        if piece.compute:
            before = self.advance(
                base=piece.ns * share,
                cost=Cost.COMPUTE_OTHER,
                phase=phase,
                kind=Segment.COMPUTE,
                label=piece.label,
                split=piece.split,
            )
            self.ctx.intervals.append((self.rank, before, self.node, "compute", None))
        else:
            self.advance(fixed=piece.ns, kind=Segment.HOST_GAP, phase=phase)

    def issue(self, key: tuple, row: dict) -> int:
        """A planned collective issued here (its end node)."""
        b = self.ctx.b
        start, end = b.node(round(self.at), self.rank), b.node(round(self.at), self.rank)
        b.edge(self.node, start, kind=Segment.LAUNCH_DELAY, label=row["op"])
        i = self.ctx.instances.add(("synthetic", *key), row)
        self.ctx.instances.members[i].append((self.rank, start, end))
        self.ctx.intervals.append((self.rank, start, end, "comm", row["parallel_dim"]))
        return end

    def wait(self, ends: list[int], label: str | None = None) -> None:
        """The main thread goes on once every end is reached."""
        if not ends:
            return
        self.advance(kind=Segment.SYNC_TAIL)
        for end in ends:
            self.ctx.b.edge(end, self.node, kind=Segment.SYNC_TAIL, label=label)


# One action of a stage's step (`schedule_actions`): ("compute", direction, m) runs a micro-batch's
# region; ("send" | "recv", direction, m) issues its activations' (forward) or gradients' (backward)
# transfer to or from the next stage that way; ("wait", handles) goes on once they are all done, a
# handle being a send or recv action or ("buckets",), the DDP buckets of the last backward.
Action = tuple


def schedule_actions(schedule: str, pp: int, microbatches: int, stage: int) -> list[Action]:
    """One stage's step as torch.distributed.pipelining runs it (its schedules' order of compute
    and of the sends and receives, which each wait for the peer's matching one), ending with the
    wait for its last sends and its gradients' buckets.
    gpipe (ScheduleGPipe): every micro-batch's forward, each received then sent on, the loop's sends
    awaited at its end; then every backward likewise.
    1f1b (Schedule1F1B): pp - stage forwards (at most the micro-batches), each waiting for the
    previous one's send after its compute (the last one's send is held), then backward and forward in
    turn, each one's receive issued together with the held send of the one before and both awaited,
    then the remaining backwards, each waiting for the previous one's send after its compute."""
    first, last = stage == 0, stage == pp - 1
    out: list[Action] = []

    def issue(*actions: Action) -> list[Action]:
        """The actions that have a peer, issued."""
        kept = [a for a in actions if not _edge(a, first, last)]
        out.extend(kept)
        return kept

    def wait(handles: list[Action]) -> None:
        if handles:
            out.append(("wait", handles))

    if schedule == "gpipe":
        for direction in ("forward", "backward"):
            sends: list[Action] = []
            for m in range(microbatches):
                wait(issue(("recv", direction, m)))
                out.append(("compute", direction, m))
                if direction == "backward" and m == microbatches - 1:
                    sends.append(("buckets",))
                sends += issue(("send", direction, m))
            wait(sends)
        return out
    warmup = min(microbatches, pp - stage)
    held: list[Action] = []  # sent, awaited later
    for m in range(warmup):
        wait(issue(("recv", "forward", m)))
        out.append(("compute", "forward", m))
        wait(held)
        held = issue(("send", "forward", m)) if m != warmup - 1 else []
    pending = ("send", "forward", warmup - 1)  # issued with the first backward's receive
    forward, backward = warmup, 0
    while True:
        wait(issue(pending, ("recv", "backward", backward)))
        out.append(("compute", "backward", backward))
        pending, backward = ("send", "backward", backward), backward + 1
        if forward == microbatches:
            break
        wait(issue(pending, ("recv", "forward", forward)))
        out.append(("compute", "forward", forward))
        pending, forward = ("send", "forward", forward), forward + 1
    held = issue(pending)
    while backward < microbatches:
        wait(issue(("recv", "backward", backward)))
        out.append(("compute", "backward", backward))
        wait(held)
        held = issue(("send", "backward", backward))
        backward += 1
    wait([*held, ("buckets",)])
    return out


def _upstream(action: Action) -> bool:
    """Whether a send's or recv's peer is the stage before (a forward's receive, a backward's send)."""
    kind, direction, _ = action
    return (kind == "recv") == (direction == "forward")


def _edge(action: Action, first: bool, last: bool) -> bool:
    """Whether a send or recv has no peer: nothing before the first stage, nothing after the last."""
    return first if _upstream(action) else last


def _add_stage(ctx: RunContext, plan: _Plan, pipeline: int, stage: int, cuts: list[StepCut]) -> RankWindows:
    """One stage of the measured rank `pipeline`'s pipeline: its chain over every step, each step's
    micro-batches in the order of the plan's schedule (`schedule_actions`)."""
    f = ctx.timeline.facts
    rank = pipeline * plan.pp + stage
    chain = _Chain(ctx, rank, cuts[0].start_ns)
    p2p = {
        "transfer_ns": 0.0,
        "op": "send",
        "bytes": plan.activation_bytes,
        "dtype": f.dtype,
        "group_size": 2,
        "parallel_dim": "pp",
    }
    actions = schedule_actions(plan.schedule, plan.pp, plan.microbatches, stage)
    starts, ends = [], []
    for k, cut in enumerate(cuts):
        if k:
            chain.advance(fixed=cut.start_ns - cuts[k - 1].end_ns, kind=Segment.HOST_GAP)
        starts.append([chain.node])
        done_at: dict[Action, list[int]] = {}
        for action in actions:
            kind = action[0]
            if kind in ("send", "recv"):
                _, direction, m = action
                peer = stage - 1 if _upstream(action) else stage + 1
                link = (pipeline, min(peer, stage), cut.step, direction, m)
                done_at[action] = [chain.issue(("pp", *link), p2p)]
            elif kind == "compute":
                _, direction, m = action
                pieces = (cut.forward if direction == "forward" else cut.backward)[stage]
                # the gradients are ready as the last micro-batch's backward does its work
                last_backward = direction == "backward" and m == plan.microbatches - 1
                buckets = _buckets(plan, f, stage, cut.step) if last_backward else []
                issued, done, work = [], 0.0, sum(p.ns for p in pieces if p.compute)
                for piece in pieces:
                    chain.piece(piece)
                    done += piece.ns if piece.compute else 0.0
                    while buckets and done >= work * buckets[0][0]:
                        issued.append(chain.issue(*buckets.pop(0)[1:]))
                if last_backward:
                    done_at[("buckets",)] = issued + [chain.issue(key, row) for _, key, row in buckets]
            else:
                handles = action[1]
                label = "recv" if all(h[0] == "recv" for h in handles) else "send"
                chain.wait([end for h in handles for end in done_at.pop(h, [])], label)
        for piece in cut.optimizer:
            chain.piece(piece, Phase.OPTIMIZER, plan.stage_shares[stage] if piece.compute else 1.0)
        ends.append(chain.node)
    return RankWindows(rank, [cut.step for cut in cuts], starts, [], ends)


def _buckets(plan: _Plan, facts, stage: int, step: int) -> list[tuple]:
    """A stage's DDP buckets across the pipelines (a group of one where the run measured one
    data-parallel rank: it spans the projected degree): (share of the backward work done when
    issued, key, row)."""
    total = plan.stage_bytes[stage]
    out, done = [], 0
    for number, size in enumerate(bucket_sizes(total)):
        done += size
        row = {
            "transfer_ns": 0.0,
            "op": "all_reduce",
            "bytes": size,
            "dtype": facts.dtype,
            "group_size": facts.data_parallel,
            "parallel_dim": "dp",
        }
        out.append((done / total, ("ddp", stage, step, number), row))
    return out
