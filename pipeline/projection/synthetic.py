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
  DDP run planned as FSDP) and its matmuls are the reference Llama's, they are placed at its layers:
  the root's all-gather where the step starts, each block's before its first matmul (wq) in
  the forward and before its first (w2's) in the backward, each awaited where issued; each block's
  reduce-scatter when its last matmul of the backward ends, the root's where the backward ends, all
  awaited there. Otherwise they are placed by work: the root's all-gather where the forward
  starts; each block's when the forward has done the blocks before it (work in proportion to the
  parameters, the blocks in order, the root's last: its output projection), and again in the
  backward when the work after it is done (the root's first), awaited where issued; each block's
  reduce-scatter when its own backward work is done, the root's where the backward ends, all
  awaited there.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
from tracehouse.collectors.model_sizes import stage_params
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.efficiency import CLASS_OF, SPLIT_CLASSES
from tracehouse.pipeline.projection.layouts import data_parallel_kind
from tracehouse.pipeline.projection.timeline import DATA_PARALLEL_DIMS, DTYPE_BYTES, RunTimeline

DDP_FIRST_BUCKET_BYTES = 1 << 20
DDP_BUCKET_BYTES = 25 << 20
FSDP_HOOKS = {"FSDP::pre_forward": "all_gather", "FSDP::pre_backward": "all_gather"}
FSDP_REDUCE_HOOK = "FSDP::post_backward_reduce"
MATMUL_NAMES = [name for name, code in CLASS_OF.items() if SPLIT_CLASSES[code] == "matmul"]
# The strategies (tracehouse collect's) whose own data-parallel collectives are planned on a run with
# one data-parallel rank: a tp run's replicas are DDP's, and a pipeline's (each stage's gradients,
# reduced as its last micro-batch's backward makes them ready).
PLANNED_STRATEGIES = ("ddp", "fsdp", "fsdp_tp", "tp", "pp")


@dataclass(frozen=True)
class Synthetic:
    """One planned collective: what, how big, issued and awaited where (epoch ns), its parallel
    dimension and group size (None: the run's data-parallel degree)."""

    op: str
    bytes: int
    issue_ns: int
    wait_ns: int
    key: tuple
    dim: str = "dp"
    group_size: int | None = None


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
    if kind == "ddp" and (f.pp or 1) > 1:
        return _stage_buckets(t, rank, segments, steps, width)
    if kind == "ddp" and f.n_params:
        per_rank = f.n_params // ((f.tp or 1) * (f.pp or 1))
        return _ddp_buckets(segments, _backward_spans(t, rank, steps), per_rank * width)
    if kind == "fsdp" and f.fsdp_units:
        units = {u: n * width for u, n in f.fsdp_units.items()}
        if t.fsdp_hooks.filter(pl.col("rank") == rank).is_empty():
            by_layers = _fsdp_by_layers(t, rank, steps, units)
            return by_layers if by_layers is not None else _fsdp_by_work(t, rank, segments, steps, units)
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


def _stage_buckets(t: RunTimeline, rank: int, segments, steps: pl.DataFrame, width: int) -> list[Synthetic]:
    """A pipeline stage's DDP buckets: its parameters' gradients (the reference model's stage, else
    n_params / (tp x pp)), issued as the step's last micro-batch backward (ScheduleGPipe's
    `Backward <i>` spans) does its work, awaited where it ends; none without those spans."""
    f = t.facts
    tp, pp = f.tp or 1, f.pp or 1
    stage = rank % (tp * pp) // tp  # rank = dp index x tp x pp + stage x tp + tp index
    params = stage_params(f.model, pp, stage) if f.model is not None else (f.n_params or 0) // (tp * pp)
    spans = t.microbatch_backward.filter(pl.col("rank") == rank)
    last = []
    for step, start, end in steps.select(["step", "start_ns", "end_ns"]).iter_rows():
        inside = spans.filter((pl.col("start_ns") >= start) & (pl.col("end_ns") <= end))
        if not inside.is_empty():
            final = inside.sort("start_ns").row(-1, named=True)
            last.append((step, final["start_ns"], final["end_ns"]))
    return _ddp_buckets(segments, last, params * width) if params else []


def _ddp_buckets(segments, spans: list[tuple[int, int, int]], total: int) -> list[Synthetic]:
    """DDP's buckets of `total` gradient bytes per (step, first start, last end) of a backward:
    each issued when the backward's compute has done the share of its work the gradients up to it
    represent, all awaited where it ends."""
    sizes = bucket_sizes(total)
    out = []
    for step, lo, hi in spans:
        clipped = _clipped(segments, lo, hi)
        work = sum(e - s for s, e in clipped)
        done = 0
        for number, size in enumerate(sizes):
            done += size
            issue = _after_work(clipped, lo, work * done / total)
            out.append(Synthetic("all_reduce", size, issue, hi, ("ddp", step, number)))
    return out


def bucket_sizes(total: int) -> list[int]:
    """DDP's default buckets for `total` gradient bytes: about 1 MiB first, then 25 MiB each."""
    sizes = [min(DDP_FIRST_BUCKET_BYTES, total)]
    while sum(sizes) < total:
        sizes.append(min(DDP_BUCKET_BYTES, total - sum(sizes)))
    return sizes


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


def _fsdp_by_layers(t, rank, steps, unit_bytes: dict[str, int]) -> list[Synthetic] | None:
    """FSDP's collectives on a trace of the reference Llama without FSDP's hooks, placed at its
    layers' matmuls (module docstring); None where the units or matmuls are not the reference
    model's (each block a unit `layers.<i>`, 7 matmuls a block and the output; twice that in the
    backward)."""
    f = t.facts
    blocks = sorted((u for u in unit_bytes if u), key=_unit_order)
    if f.model is None or blocks != [f"layers.{i}" for i in range(f.model.n_layers)]:
        return None
    try:
        layers = reference_matmuls(t, rank, steps)
    except TracehouseError:
        return None
    root = unit_bytes.get("", 0)
    starts = dict(steps.select(["step", "start_ns"]).iter_rows())
    out = []
    for step, forward, backward, (_, hi) in layers:

        def planned(op: str, unit: str, at: int, wait: int, where: str, step: int = step) -> Synthetic:
            return Synthetic(op, unit_bytes[unit], at, wait, ("fsdp", step, where, unit))

        if root:
            out.append(planned("all_gather", "", starts[step], starts[step], "forward"))
        for i, unit in enumerate(blocks):
            at = forward[BLOCK_LINEARS * i][0]  # before its wq
            out.append(planned("all_gather", unit, at, at, "forward"))
        for k, unit in enumerate(reversed(blocks)):  # the backward reaches the last block first
            first = 2 * (1 + BLOCK_LINEARS * k)  # its w2's first matmul (after the output's two)
            out.append(planned("all_gather", unit, backward[first][0], backward[first][0], "backward"))
            ready = backward[first + 2 * BLOCK_LINEARS - 1][1]  # its last layer's second matmul ends
            out.append(planned("reduce_scatter", unit, ready, hi, "reduce"))
        if root:
            out.append(planned("reduce_scatter", "", hi, hi, "reduce"))
    return out


def reference_matmuls(t: RunTimeline, rank: int, steps: pl.DataFrame) -> list[tuple]:
    """Per step of the rank: (step, forward matmuls, backward matmuls, the backward's span), each
    matmul (start, end), where they are the reference Llama's (7 a block and the output; twice that
    in the backward); else a TracehouseError saying what the step has."""
    f = t.facts
    if f.model is None:
        raise TracehouseError(f"{f.study}/{f.run_id}: its manifest gives no reference model_config")
    layers = f.model.n_layers
    calls = t.counted_ops.filter(
        (pl.col("rank") == rank) & pl.col("name").is_in(MATMUL_NAMES) & (pl.col("flops") > 0)
    )
    spans = {step: (lo, hi) for step, lo, hi in _backward_spans(t, rank, steps)}
    out = []
    for step, lo, hi in steps.select(["step", "start_ns", "end_ns"]).iter_rows():
        inside = calls.filter((pl.col("start_ns") >= lo) & (pl.col("end_ns") <= hi))
        forward = inside.filter(pl.col("phase") == "forward").select(["start_ns", "end_ns"]).rows()
        backward = inside.filter(pl.col("phase") == "backward").select(["start_ns", "end_ns"]).rows()
        expected = BLOCK_LINEARS * layers + 1
        if (len(forward), len(backward)) != (expected, 2 * expected) or step not in spans:
            raise TracehouseError(
                f"{f.study}/{f.run_id}: step {step} on rank {rank} has {len(forward)} forward and "
                f"{len(backward)} backward matmuls, not the reference model's {expected} and {2 * expected} "
                f"({layers} blocks of {BLOCK_LINEARS} and the output)"
            )
        out.append((step, forward, backward, spans[step]))
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


# Tensor parallelism as tracehouse collect applies it to the reference Llama (collectors/parallel.py):
# per block, in forward order, wq, wk, wv (column-parallel), wo (row-parallel), w1, w3 (column),
# w2 (row); the output projection column-parallel with its logits gathered; the embedding
# row-parallel. A row-parallel layer all-reduces its output in the forward; a column-parallel one
# all-reduces its input's gradient in the backward, where the backward reaches the layers in
# reverse order (w2, then w1 and w3 in either order; wo, then wq, wk and wv in any order).
BLOCK_LINEARS = 7
ROW_PARALLEL_FORWARD = (3, 6)  # wo, w2: their forward ends with an all-reduce
COLUMN_PARALLEL_BACKWARD = (1, 2, 4, 5, 6)  # in backward order (w2, w1|w3, w1|w3, wo, wq|wk|wv x3)


def planned_tp_collectives(t: RunTimeline, rank: int, steps: pl.DataFrame, tp_new: int) -> list[Synthetic]:
    """The tensor-parallel collectives of one CPU rank of a run without tensor parallelism, as a
    tp_new-way split of its reference Llama would issue them (each blocking: issued and awaited
    where the layer's matmul ends): per step, the embedding's all-reduce where the first matmul
    starts, an all-reduce after each row-parallel matmul, the logits' all-gather after the output
    projection, and in the backward an all-reduce after each column-parallel layer's two matmuls.
    Activations: tokens per data-parallel rank x d_model x the dtype's bytes. A step whose matmuls
    are not the reference model's (7 per block and the output; twice that in the backward) is a
    TracehouseError."""
    f = t.facts
    width = DTYPE_BYTES.get(f.dtype or "fp32")
    if f.model is None or width is None or not f.tokens_per_step:
        raise TracehouseError(
            f"{f.study}/{f.run_id}: a change of tensor parallelism is planned for tracehouse's reference "
            "Llama: its manifest needs a reference model_config, tokens_per_step and a known dtype"
        )
    sizes = {"heads": f.model.n_heads, "kv heads": f.model.n_kv_heads, "ffn_hidden": f.model.ffn_hidden}
    sizes["vocab"] = f.model.vocab_size
    uneven = [f"{name} {n}" for name, n in sizes.items() if n % tp_new]
    if uneven:
        raise TracehouseError(
            f"{f.study}/{f.run_id}: tp={tp_new} does not divide its model's {', '.join(uneven)}"
        )
    layers = f.model.n_layers
    tokens = f.tokens_per_step // f.data_parallel
    hidden = tokens * f.model.d_model * width
    logits = tokens * f.model.vocab_size * width
    out = []
    try:
        matmuls = reference_matmuls(t, rank, steps)
    except TracehouseError as exc:
        raise TracehouseError(f"{exc}, so its tensor-parallel collectives cannot be placed") from None
    for step, forward, backward, _ in matmuls:
        expected = BLOCK_LINEARS * layers + 1
        pairs = [backward[2 * i + 1][1] for i in range(expected)]  # each layer's second matmul ends
        at = [("all_reduce", hidden, forward[0][0])]  # the embedding's output
        at += [
            ("all_reduce", hidden, forward[BLOCK_LINEARS * block + j][1])
            for block in range(layers)
            for j in ROW_PARALLEL_FORWARD
        ]
        at.append(("all_gather", logits, forward[-1][1]))
        at.append(("all_reduce", hidden, pairs[0]))  # the output projection's input gradient
        at += [
            ("all_reduce", hidden, pairs[1 + BLOCK_LINEARS * block + j])
            for block in range(layers)
            for j in COLUMN_PARALLEL_BACKWARD
        ]
        out += [Synthetic(op, b, x, x, ("tp", step, n), "tp", tp_new) for n, (op, b, x) in enumerate(at)]
    return out
