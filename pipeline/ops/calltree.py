"""The host call tree of one trace in array form: who encloses whom on each thread.

The parser builds each trace's tree with these walks (parsers/kineto/ops.py), and the warehouse
walks the stored trees again with them (ops/tree_facts.py): the one home of the array algorithms.

Events are laid out in thread order (pid, tid, then start ascending, end descending, file order),
so an event's enclosing events come before it. Its parent is the last earlier event of its thread
whose end is at or after its own: the innermost one enclosing it (intervals are closed). This is
the "previous greater or equal" problem, solved by pointer jumping over whole arrays: every
position keeps a candidate such that every event between the two ends earlier than its own, and
jumps to the candidate's candidate until that one ends late enough; the jumps double, so a few
dozen numpy passes suffice. Calls that do not nest cleanly (a child ending after its parent, as
in MTIA traces) still get the innermost event that truly encloses them, or none.
"""

from __future__ import annotations

import numpy as np

NONE = -1


def enclosing(ends: np.ndarray, thread_start: np.ndarray) -> np.ndarray:
    """Per position in thread order: the position of its innermost enclosing event, else NONE.

    `ends`: each event's end; `thread_start`: the first position of its thread.
    """
    n = len(ends)
    parent = np.arange(n, dtype=np.int64) - 1
    parent[parent < thread_start] = NONE
    active = np.flatnonzero(parent != NONE)
    while active.size:
        cand = parent[active]
        short = ends[cand] < ends[active]
        active, cand = active[short], cand[short]
        parent[active] = parent[cand]  # everything between those two ends earlier too
        parent[active[parent[active] < thread_start[active]]] = NONE
        active = active[parent[active] != NONE]
    return parent


def nearest(parent: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Per position: itself if `keep`, else its nearest ancestor that is `keep`, else NONE."""
    up = np.where(keep, np.arange(len(parent)), parent)
    active = np.flatnonzero(up != NONE)
    active = active[~keep[up[active]]]
    while active.size:
        up[active] = up[up[active]]
        active = active[up[active] != NONE]
        active = active[~keep[up[active]]]
    return up


def above(parent: np.ndarray, found: np.ndarray) -> np.ndarray:
    """`found` (from `nearest`) of each position's parent: the nearest strict ancestor, else NONE."""
    return np.where(parent != NONE, found[np.maximum(parent, 0)], NONE)


def depths(parent: np.ndarray) -> np.ndarray:
    """Per position: how many ancestors it has (list ranking: the jumps double each pass)."""
    up = parent.copy()
    depth = (up != NONE).astype(np.int64)  # edges from each position to `up`
    active = np.flatnonzero(up != NONE)
    while active.size:
        target = up[active]
        depth[active], up[active] = depth[active] + depth[target], up[target]
        active = active[up[active] != NONE]
    return depth
