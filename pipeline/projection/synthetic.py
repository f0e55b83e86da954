"""The data-parallel collectives a run would issue that its trace does not show.

A DDP, FSDP or tensor-parallel run with one data-parallel rank issues no gradient all-reduce,
all-gather or reduce-scatter; projecting it to more ranks needs them. A change of data-parallel
kind (DDP as FSDP, FSDP as DDP: `--layout`) needs the other kind's. They are planned from the
run's facts and its trace (where each would be issued and awaited) and added to the graph with a
zero transfer, so the replay of the measurement is unchanged (docs/projection.md "Scenarios", "A
change of layout"); the same planned collective on every rank of a data-parallel group (the ranks
that hold the same tensor-parallel shard: rank mod tp, tracehouse collect's (dp, tp) mesh) is one
instance, which they wait for.
* DDP: the gradients of the parameters a rank holds (n_params / (tp x pp) x dtype bytes) in DDP's
  default buckets (about 1 MiB first, then 25 MiB), each issued when the step's backward compute has
  done the share of its work the gradients up to it represent (they are ready last layer first, in
  proportion to the work); all awaited where the backward ends (DDP's finalize).
* FSDP (units: the manifest's `fsdp_units`, else its reference model's, parameters per unit): where
  the trace shows FSDP's hooks, per unit and step, an all-gather of the unit issued at its
  `FSDP::pre_forward` hook and awaited at the hook's end, again at its `FSDP::pre_backward` hook for
  every unit but the root (which FSDP keeps unsharded), and a reduce-scatter of its gradients issued
  at its `FSDP::post_backward_reduce` hook, awaited where the backward ends. Where it shows none (a
  DDP run planned as FSDP), the hooks are placed by work: the root's all-gather where the forward
  starts; each block's when the forward has done the blocks before it (work in proportion to the
  parameters, the blocks in order, the root's last: its output projection), and again in the
  backward when the work after it is done (the root's first), awaited where issued; each block's
  reduce-scatter when its own backward work is done, the root's where the backward ends, all
  awaited there.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
from tracehouse.pipeline.projection.layouts import data_parallel_kind
from tracehouse.pipeline.projection.timeline import DATA_PARALLEL_DIMS, DTYPE_BYTES, RunTimeline

DDP_FIRST_BUCKET_BYTES = 1 << 20
DDP_BUCKET_BYTES = 25 << 20
FSDP_HOOKS = {"FSDP::pre_forward": "all_gather", "FSDP::pre_backward": "all_gather"}
FSDP_REDUCE_HOOK = "FSDP::post_backward_reduce"
# The strategies (tracehouse collect's) whose own data-parallel collectives are planned on a run with
# one data-parallel rank: a tp run's replicas are DDP's. A pipeline run's are not: DDP reduces a
# stage's gradients after its last micro-batch, which the work of the whole backward does not place.
PLANNED_STRATEGIES = ("ddp", "fsdp", "fsdp_tp", "tp")


@dataclass(frozen=True)
class Synthetic:
    """One planned collective: what, how big, issued and awaited where (epoch ns)."""

    op: str
    bytes: int
    issue_ns: int
    wait_ns: int
    key: tuple


def planned_collectives(
    t: RunTimeline,
    rank: int,
    segments: list[tuple[int, int]],
    steps: pl.DataFrame,
    spans: pl.DataFrame,
    kind: str | None = None,
) -> list[Synthetic]:
    """The planned collectives of one CPU rank: those of data-parallel `kind` ("ddp", "fsdp")
    where it is not the run's own; else, the run's own where it measured one data-parallel rank
    and issues none (none otherwise)."""
    f = t.facts
    if kind is None or kind == data_parallel_kind(f.strategy):
        if f.data_parallel != 1 or spans["parallel_dim"].is_in(DATA_PARALLEL_DIMS).any():
            return []
        kind = data_parallel_kind(f.strategy) if f.strategy in PLANNED_STRATEGIES else None
    width = DTYPE_BYTES.get(f.dtype or "fp32")
    if width is None or kind is None:
        return []
    if kind == "ddp" and f.n_params:
        per_rank = f.n_params // ((f.tp or 1) * (f.pp or 1))
        return _ddp_buckets(t, rank, segments, steps, per_rank * width)
    if kind == "fsdp" and f.fsdp_units:
        units = {u: n * width for u, n in f.fsdp_units.items()}
        if t.fsdp_hooks.filter(pl.col("rank") == rank).is_empty():
            return _fsdp_by_work(t, rank, segments, steps, units)
        return _fsdp_collectives(t, rank, steps, units)
    return []


def _backward_spans(t: RunTimeline, rank: int, steps: pl.DataFrame) -> list[tuple[int, int, int]]:
    """(step, first start, last end) of the autograd evaluate_function events of each step."""
    backward = t.backward.filter(pl.col("rank") == rank)
    out = []
    for step, start, end in steps.select(["step", "start_ns", "end_ns"]).iter_rows():
        inside = backward.filter((pl.col("start_ns") >= start) & (pl.col("end_ns") <= end))
        if not inside.is_empty():
            out.append((step, inside["start_ns"].min(), inside["end_ns"].max()))
    return out


def _ddp_buckets(t, rank, segments, steps, total: int) -> list[Synthetic]:
    sizes = [min(DDP_FIRST_BUCKET_BYTES, total)]
    while sum(sizes) < total:
        sizes.append(min(DDP_BUCKET_BYTES, total - sum(sizes)))
    out = []
    for step, lo, hi in _backward_spans(t, rank, steps):
        clipped = _clipped(segments, lo, hi)
        work = sum(e - s for s, e in clipped)
        done = 0
        for number, size in enumerate(sizes):
            done += size
            issue = _after_work(clipped, lo, work * done / total)
            out.append(Synthetic("all_reduce", size, issue, hi, ("ddp", step, number)))
    return out


def _after_work(clipped: list[tuple[int, int]], lo: int, amount: float) -> int:
    """The instant at which `amount` ns of the clipped compute segments are done."""
    left = amount
    for s, e in clipped:
        if left <= e - s:
            return s + round(left)  # epoch ns plus a relative amount: no float64 rounding
        left -= e - s
    return clipped[-1][1] if clipped else lo


def _fsdp_collectives(t, rank, steps, unit_bytes: dict[str, int]) -> list[Synthetic]:
    hooks = t.fsdp_hooks.filter(pl.col("rank") == rank)
    backward_end = {step: hi for step, _, hi in _backward_spans(t, rank, steps)}
    spans = list(steps.select(["step", "start_ns", "end_ns"]).iter_rows())
    out = []
    seen: dict[tuple, int] = {}
    for name, start, end in hooks.select(["name", "start_ns", "end_ns"]).iter_rows():
        hook, unit = _hook_unit(name)
        step = next((s for s, lo, hi in spans if lo <= start < hi), None)
        if unit not in unit_bytes or step is None:
            continue
        key = (hook, unit, step, seen.setdefault((hook, unit, step), 0))
        seen[(hook, unit, step)] += 1
        if hook in FSDP_HOOKS and not (hook == "FSDP::pre_backward" and unit == ""):
            out.append(Synthetic(FSDP_HOOKS[hook], unit_bytes[unit], start, end, key))
        elif hook == FSDP_REDUCE_HOOK and step in backward_end:
            wait = max(backward_end[step], start)
            out.append(Synthetic("reduce_scatter", unit_bytes[unit], start, wait, key))
    return out


def _fsdp_by_work(t, rank, segments, steps, unit_bytes: dict[str, int]) -> list[Synthetic]:
    """FSDP's collectives on a trace without its hooks, placed by work (module docstring)."""
    blocks = sorted((u for u in unit_bytes if u), key=_unit_order)
    root = unit_bytes.get("", 0)
    total = sum(unit_bytes.values())
    starts = {step: lo for step, lo, _ in steps.select(["step", "start_ns", "end_ns"]).iter_rows()}
    out = []
    for step, lo, hi in _backward_spans(t, rank, steps):
        first = starts[step]
        forward = _clipped(segments, first, lo)
        backward = _clipped(segments, lo, hi)
        forward_work = sum(e - s for s, e in forward)
        backward_work = sum(e - s for s, e in backward)
        if root:
            out.append(Synthetic("all_gather", root, first, first, ("fsdp", step, "forward", "")))
        before = 0
        for unit in blocks:
            at = _after_work(forward, first, forward_work * before / total)
            out.append(Synthetic("all_gather", unit_bytes[unit], at, at, ("fsdp", step, "forward", unit)))
            before += unit_bytes[unit]
        after = root
        for unit in reversed(blocks):
            at = _after_work(backward, lo, backward_work * after / total)
            out.append(Synthetic("all_gather", unit_bytes[unit], at, at, ("fsdp", step, "backward", unit)))
            after += unit_bytes[unit]
            ready = _after_work(backward, lo, backward_work * after / total)
            key = ("fsdp", step, "reduce", unit)
            out.append(Synthetic("reduce_scatter", unit_bytes[unit], ready, hi, key))
        if root:
            out.append(Synthetic("reduce_scatter", root, hi, hi, ("fsdp", step, "reduce", "")))
    return out


def _unit_order(unit: str) -> tuple:
    """Blocks in model order: `layers.10` after `layers.9` (numbers compared as numbers)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in unit.split("."))


def _clipped(segments: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """The compute segments inside [lo, hi), cut at its bounds."""
    return [(max(s, lo), min(e, hi)) for s, e in segments if e > lo and s < hi]


def _hook_unit(name: str) -> tuple[str, str]:
    """`FSDP::pre_forward (layers.0)` -> ("FSDP::pre_forward", "layers.0"); the root has no unit."""
    hook, _, rest = name.partition(" (")
    return hook, rest.removesuffix(")") if rest else ""
