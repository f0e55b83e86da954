"""The data-parallel collectives a run measured on one data-parallel rank would issue at more.

A DDP or FSDP run with one data-parallel rank issues no gradient all-reduce, all-gather or
reduce-scatter; projecting it to more ranks needs them. They are planned from the run's facts and
its trace (where each would be issued and awaited) and added to the graph with a zero transfer, so
the replay of the measurement is unchanged (docs/projection.md "Scenarios").
* DDP: n_params x dtype bytes of gradients in DDP's default buckets (about 1 MiB first, then
  25 MiB), each issued when the step's backward compute has done the share of its work the
  gradients up to it represent (they are ready last layer first, in proportion to the work); all
  awaited where the backward ends (DDP's finalize).
* FSDP (the manifest's `fsdp_units`, parameters per unit): per unit and step, an all-gather of the
  unit issued at its `FSDP::pre_forward` hook and awaited at the hook's end, again at its
  `FSDP::pre_backward` hook for every unit but the root (which FSDP keeps unsharded), and a
  reduce-scatter of its gradients issued at its `FSDP::post_backward_reduce` hook, awaited where
  the backward ends.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
from tracehouse.pipeline.projection.timeline import DATA_PARALLEL_DIMS, DTYPE_BYTES, RunTimeline

DDP_FIRST_BUCKET_BYTES = 1 << 20
DDP_BUCKET_BYTES = 25 << 20
FSDP_HOOKS = {"FSDP::pre_forward": "all_gather", "FSDP::pre_backward": "all_gather"}
FSDP_REDUCE_HOOK = "FSDP::post_backward_reduce"


@dataclass(frozen=True)
class Synthetic:
    """One planned collective: what, how big, issued and awaited where (epoch ns)."""

    op: str
    bytes: int
    issue_ns: int
    wait_ns: int
    key: tuple


def one_device_collectives(
    t: RunTimeline, rank: int, segments: list[tuple[int, int]], steps: pl.DataFrame, spans: pl.DataFrame
) -> list[Synthetic]:
    """The planned collectives of one CPU rank; none when the run already issues data-parallel ones."""
    f = t.facts
    dp = f.dp or (f.world_size // ((f.tp or 1) * (f.pp or 1)))
    if dp != 1 or spans["parallel_dim"].is_in(DATA_PARALLEL_DIMS).any():
        return []
    width = DTYPE_BYTES.get(f.dtype or "fp32")
    if width is None:
        return []
    if f.strategy == "ddp" and f.n_params:
        return _ddp_buckets(t, rank, segments, steps, f.n_params * width)
    if (f.strategy or "").startswith("fsdp") and f.fsdp_units:
        return _fsdp_collectives(t, rank, steps, {u: n * width for u, n in f.fsdp_units.items()})
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
        clipped = [(max(s, lo), min(e, hi)) for s, e in segments if e > lo and s < hi]
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
    for name, start, end in hooks.select(["name", "start_ns", "end_ns"]).iter_rows():
        hook, unit = _hook_unit(name)
        step = next((s for s, lo, hi in spans if lo <= start < hi), None)
        if unit not in unit_bytes or step is None:
            continue
        if hook in FSDP_HOOKS and not (hook == "FSDP::pre_backward" and unit == ""):
            out.append(Synthetic(FSDP_HOOKS[hook], unit_bytes[unit], start, end, (hook, unit, start)))
        elif hook == FSDP_REDUCE_HOOK and step in backward_end:
            wait = max(backward_end[step], start)
            out.append(Synthetic("reduce_scatter", unit_bytes[unit], start, wait, (hook, unit, start)))
    return out


def _hook_unit(name: str) -> tuple[str, str]:
    """`FSDP::pre_forward (layers.0)` -> ("FSDP::pre_forward", "layers.0"); the root has no unit."""
    hook, _, rest = name.partition(" (")
    return hook, rest.removesuffix(")") if rest else ""
