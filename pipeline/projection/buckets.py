"""A different DDP bucket size: each step's gradient all-reduces regrouped (docs/projection.md).

DDP all-reduces gradients in buckets (`bucket_cap_mb`, 25 MB by default, the first bucket 1 MiB),
each issued when its last gradient is ready. With buckets of `cap` bytes, a step's gradient bytes
after the first bucket (in the order the measured or planned buckets were issued) are cut into
buckets of `cap`. A new bucket is ready when the measured bucket holding its last byte was
issued, so its transfer goes on that instance; a measured bucket that holds no new bucket's last
byte transfers nothing, and one that holds several carries them one after another (their earlier
readiness is not modelled: a split is conservative). The first bucket keeps its measured size, as
DDP's first bucket keeps its own cap.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from itertools import accumulate

from tracehouse.pipeline.projection.build import RunGraph


def step_groups(run: RunGraph, candidates: list[int]) -> list[list[int]]:
    """The candidate instances grouped by their ranks and their first member's step, each group
    in issue order (its first member's measured start)."""
    times = run.graph.measured_times()
    bounds = {
        w.rank: [(run.window_bounds(times, w.rank, step)[0], step) for step in w.steps] for w in run.windows
    }
    groups: dict[tuple, list[tuple[float, int]]] = defaultdict(list)
    for i in candidates:
        rank, start, _ = run.instances.members[i][0]
        opened = [step for began, step in bounds.get(rank, []) if began <= times[start]]
        step = opened[-1] if opened else None
        ranks = tuple(sorted(r for r, _, _ in run.instances.members[i]))
        groups[(ranks, step)].append((times[start], i))
    return [
        [i for _, i in sorted(members)] for _, members in sorted(groups.items(), key=lambda kv: str(kv[0]))
    ]


def regrouped(sizes: list[float], cap: float) -> list[list[float]]:
    """Per measured bucket (in issue order), the sizes of the new buckets whose transfer it carries."""
    carried: list[list[float]] = [[] for _ in sizes]
    if not sizes:
        return carried
    carried[0].append(sizes[0])
    ends = list(accumulate(sizes[1:]))
    total = ends[-1] if ends else 0.0
    done = 0.0
    while done < total:
        end = min(done + cap, total)
        holder = bisect.bisect_left(ends, end - 1e-6 * cap)  # the bucket holding the new one's last byte
        carried[1 + holder].append(end - done)
        done = end
    return carried
