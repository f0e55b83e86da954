"""The METHODOLOGY breakdown of a replayed run: its step windows split into compute, exposed
communication (and that split by parallel dimension, each exposed instant shared equally among the
intervals in flight), other and idle, read off the replayed times of the graph's intervals."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from statistics import median

import numpy as np
from tracehouse.pipeline.projection.build import RunGraph
from tracehouse.pipeline.projection.timeline import DATA_PARALLEL_DIMS

DIMENSIONS = ("dp", "tp", "pp", "other")


def dimension_of(dim: str | None) -> str:
    """The projection's four groups of parallel dimensions."""
    if dim in DATA_PARALLEL_DIMS:
        return "dp"
    if dim in ("tp", "pp"):
        return dim
    return "other"


@dataclass
class StepBreakdown:
    """One rank's window, in µs."""

    window_us: float
    compute_us: float = 0.0
    exposed_us: float = 0.0
    other_us: float = 0.0
    idle_us: float = 0.0
    exposed_by_dim_us: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ReplayedRun:
    """The replayed step time (median over steps of the slowest rank's window) and the breakdown
    of every rank's windows, summed over ranks and steps, as fractions of the summed windows (the
    shares of scale_points, so a projection compares with the measured run's)."""

    step_time_us: float
    step_times_us: dict[int | None, float]
    compute_frac: float
    exposed_comm_frac: float
    other_frac: float
    idle_frac: float
    exposed_by_dim_frac: dict[str, float]


def summarize(run: RunGraph, times: np.ndarray) -> ReplayedRun:
    """Step times (the slowest rank's window of every step) and the breakdown of every window."""
    per_step = run.step_times(times)
    step_times = {step: max(ranks.values()) for step, ranks in per_step.items() if ranks}
    by_rank = intervals_by_rank(run)
    parts = [
        window_breakdown(run, times, rank, step, by_rank.get(rank))
        for step, ranks in per_step.items()
        for rank in ranks
    ]
    total = sum(p.window_us for p in parts) or 1.0
    by_dim = defaultdict(float)
    for p in parts:
        for dim, value in p.exposed_by_dim_us.items():
            by_dim[dim] += value
    return ReplayedRun(
        step_time_us=median(step_times.values()) if step_times else 0.0,
        step_times_us=step_times,
        compute_frac=sum(p.compute_us for p in parts) / total,
        exposed_comm_frac=sum(p.exposed_us for p in parts) / total,
        other_frac=sum(p.other_us for p in parts) / total,
        idle_frac=sum(p.idle_us for p in parts) / total,
        exposed_by_dim_frac={dim: by_dim.get(dim, 0.0) / total for dim in DIMENSIONS},
    )


# One rank's intervals: start nodes, end nodes and channels ("compute", "memory", "comm:<dimension>").
RankIntervals = tuple[np.ndarray, np.ndarray, np.ndarray]


def intervals_by_rank(run: RunGraph) -> dict[int, RankIntervals]:
    """The run's intervals per rank, each with its channel: its class, a communication interval's
    by its dimension group (`dimension_of`)."""
    rank, start, end, klass, dim = run.interval_arrays
    comm = klass == "comm"
    channel = klass.copy()
    channel[comm] = [f"comm:{dimension_of(d)}" for d in dim[comm]]
    return {int(r): (start[rank == r], end[rank == r], channel[rank == r]) for r in np.unique(rank)}


def window_breakdown(
    run: RunGraph,
    times: np.ndarray,
    rank: int,
    step: int | None,
    intervals: RankIntervals | None = None,
) -> StepBreakdown:
    """Compute, exposed communication (by dimension), other and idle of one replayed window;
    `intervals` are the rank's (intervals_by_rank), read off the run when None."""
    lo, hi = run.window_bounds(times, rank, step)
    result = StepBreakdown(window_us=(hi - lo) / 1000.0)
    if intervals is None:
        intervals = intervals_by_rank(run).get(rank)
    if intervals is None:
        result.idle_us = result.window_us
        return result
    start, end, channel = intervals
    s, e = np.maximum(times[start], lo), np.minimum(times[end], hi)
    inside = e > s
    if not inside.any():
        result.idle_us = result.window_us
        return result
    s, e, channel = s[inside], e[inside], channel[inside]
    bounds = np.unique(np.concatenate([[lo, hi], s, e]))
    lengths = np.diff(bounds)
    active = {name: _active(bounds, s[channel == name], e[channel == name]) for name in np.unique(channel)}
    zero = np.zeros(len(lengths))
    compute = active.get("compute", zero) > 0
    comm_count = sum((v for k, v in active.items() if k.startswith("comm:")), zero)
    memory = active.get("memory", zero) > 0
    exposed = (comm_count > 0) & ~compute
    result.compute_us = float(lengths[compute].sum()) / 1000.0
    result.exposed_us = float(lengths[exposed].sum()) / 1000.0
    result.other_us = float(lengths[memory & ~compute & (comm_count == 0)].sum()) / 1000.0
    busy = compute | (comm_count > 0) | memory
    result.idle_us = result.window_us - float(lengths[busy].sum()) / 1000.0
    share = np.divide(lengths, comm_count, out=np.zeros_like(lengths), where=exposed)
    for name, count in active.items():
        if name.startswith("comm:"):
            result.exposed_by_dim_us[name[5:]] = float((share * count).sum()) / 1000.0
    return result


def _active(bounds: np.ndarray, span_starts: np.ndarray, span_ends: np.ndarray) -> np.ndarray:
    """How many spans cover each elementary segment [bounds[i], bounds[i+1])."""
    starts = np.searchsorted(bounds, span_starts)
    ends = np.searchsorted(bounds, span_ends)
    delta = np.zeros(len(bounds) + 1)
    np.add.at(delta, starts, 1)
    np.add.at(delta, ends, -1)
    return np.cumsum(delta)[: len(bounds) - 1]
