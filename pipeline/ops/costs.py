"""Which formula each op has, and its FLOPs and bytes over a frame of unique op signatures.

The once-only rule (`innermost_flops`): a composite op (aten::linear, aten::matmul,
aten::scaled_dot_product_attention, aten::_convolution, ...) and the ops it calls may all have
formulas; the FLOPs of a unit of work are counted at the innermost call whose formula gives FLOPs,
so a call carries FLOPs only when no descendant does (a zero-FLOP copy_ inside addmm does not take
addmm's FLOPs away), and its bytes with them. Ops with no formula keep NULL, never 0.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import polars as pl
from tracehouse.pipeline.ops import attention, conv, matmul, pointwise
from tracehouse.pipeline.ops.signature import Cost, Signature

Formula = Callable[[Signature], Cost]

_FAMILIES: dict[str, tuple[str, Formula, tuple[str, ...]]] = {
    # formula name: (what it covers, function, the aten op names it applies to)
    "mm": ("matmul", matmul.mm, ("mm",)),
    "addmm": ("matmul", matmul.addmm, ("addmm",)),
    "scaled_mm": ("matmul", matmul.scaled_mm, ("_scaled_mm",)),
    "bmm": ("matmul", matmul.bmm, ("bmm",)),
    "baddbmm": ("matmul", matmul.baddbmm, ("baddbmm",)),
    "matmul": ("matmul", matmul.matmul, ("matmul",)),
    "linear": ("matmul", matmul.linear, ("linear",)),
    "sdpa": (
        "attention",
        attention.sdpa,
        (
            "scaled_dot_product_attention",
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
            "_scaled_dot_product_flash_attention_for_cpu",
        ),
    ),
    "sdpa_backward": (
        "attention",
        attention.sdpa_backward,
        (
            "_scaled_dot_product_flash_attention_backward",
            "_scaled_dot_product_efficient_attention_backward",
            "_scaled_dot_product_cudnn_attention_backward",
            "_scaled_dot_product_flash_attention_for_cpu_backward",
        ),
    ),
    "flash_forward": (
        "attention",
        attention.flash_forward,
        ("_flash_attention_forward", "_efficient_attention_forward"),
    ),
    "flash_backward": (
        "attention",
        attention.flash_backward,
        ("_flash_attention_backward", "_efficient_attention_backward"),
    ),
    "convolution": ("convolution", conv.convolution, tuple(n.split("::")[1] for n in conv.CONV_ARGS)),
    "convolution_backward": ("convolution", conv.convolution_backward, ("convolution_backward",)),
    "embedding": ("embedding", pointwise.embedding, ("embedding",)),
    "embedding_backward": ("embedding", pointwise.embedding_backward, ("embedding_dense_backward",)),
    "layer_norm": ("norm", pointwise.layer_norm, ("native_layer_norm", "layer_norm")),
    "layer_norm_backward": ("norm", pointwise.layer_norm_backward, ("native_layer_norm_backward",)),
    "rms_norm": ("norm", pointwise.rms_norm, ("rms_norm", "_fused_rms_norm")),
    "softmax": ("softmax", pointwise.softmax, ("_softmax", "_log_softmax", "softmax", "log_softmax")),
    "softmax_backward": (
        "softmax",
        pointwise.softmax_backward,
        ("_softmax_backward_data", "_log_softmax_backward_data"),
    ),
    "fused_adam": ("optimizer", pointwise.fused_adam, ("_fused_adam_", "_fused_adamw_")),
    "elementwise": (
        "elementwise",
        pointwise.elementwise,
        tuple(n for base in pointwise.FLOPS_PER_ELEMENT for n in (base, f"{base}_")),
    ),
    "foreach": (
        "optimizer",
        pointwise.foreach,
        tuple(n for base in pointwise.FLOPS_PER_ELEMENT for n in (f"_foreach_{base}", f"_foreach_{base}_")),
    ),
}
# Op names as Kineto writes them ('aten::mm') -> formula name.
FORMULA_OF: dict[str, str] = {
    f"aten::{op}": formula for formula, (_, _, ops) in _FAMILIES.items() for op in ops
}
CATEGORY_OF: dict[str, str] = {formula: category for formula, (category, _, _) in _FAMILIES.items()}
SIGNATURE_COLUMNS = ("name", "input_dims", "input_types", "concrete_inputs")
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1  # the columns' range: a cost beyond it does not fit


def op_cost(name: str, dims: str | None, types: str | None, concrete: str | None) -> tuple[str, Cost] | None:
    """The formula name and cost of one call, or None when the op has no formula or its shapes
    do not fit it (an op recorded without shapes, a nested attention call)."""
    formula = FORMULA_OF.get(name)
    if formula is None or not dims:
        return None
    try:
        return formula, _FAMILIES[formula][1](Signature.parse(name, dims, types, concrete))
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def _dtype(name: str, dims: str | None, types: str | None, concrete: str | None) -> str | None:
    """The call's compute dtype as the peak table names it, or None."""
    try:
        return Signature.parse(name, dims, types, concrete).compute_dtype()
    except (ValueError, TypeError):
        return None


def op_costs(signatures: pl.DataFrame) -> pl.DataFrame:
    """Add flops, bytes, formula and dtype to a frame of (name, input_dims, input_types, concrete_inputs).

    Each distinct signature is evaluated once (a training step repeats a few hundred signatures
    thousands of times), and once per process (`_evaluated`: the ranks of a run, which a worker
    parses one after another, share them); formula is NULL where the op has no formula, and flops
    and bytes with it. dtype: the compute dtype (bf16, fp16, fp32) whose peak bounds the call.
    """
    unique = signatures.select(SIGNATURE_COLUMNS).unique()
    rows = [_evaluated(*row) for row in unique.iter_rows()]
    costs = unique.with_columns(
        pl.Series("flops", [r[0] for r in rows], dtype=pl.Int64),
        pl.Series("bytes", [r[1] for r in rows], dtype=pl.Int64),
        pl.Series("formula", [r[2] for r in rows], dtype=pl.Utf8),
        pl.Series("dtype", [r[3] for r in rows], dtype=pl.Utf8),
    )
    return signatures.join(costs, on=list(SIGNATURE_COLUMNS), how="left", nulls_equal=True)


@lru_cache(maxsize=1 << 16)
def _evaluated(
    name: str, dims: str | None, types: str | None, concrete: str | None
) -> tuple[int | None, int | None, str | None, str | None]:
    """(flops, bytes, formula, dtype) of one signature: op_cost's and _dtype's, its text parsed once."""
    try:
        signature = Signature.parse(name, dims, types, concrete)
    except (ValueError, TypeError):
        return None, None, None, None
    try:
        dtype = signature.compute_dtype()
    except (ValueError, TypeError):
        dtype = None
    formula = FORMULA_OF.get(name)
    if formula is None or not dims:
        return None, None, None, dtype
    try:
        cost = _FAMILIES[formula][1](signature)
    except (ValueError, KeyError, IndexError, TypeError):
        return None, None, None, dtype
    if not all(value is None or INT64_MIN <= value <= INT64_MAX for value in (cost.flops, cost.bytes)):
        return None, None, None, dtype  # beyond 64 bits: shapes no real call has (a damaged trace)
    return cost.flops, cost.bytes, formula, dtype


def _ancestors(parents: pl.DataFrame, ids: pl.Series, max_depth: int) -> pl.Series:
    """Every ancestor of the calls ids (parents: id, parent_id)."""
    found = pl.Series("id", [], dtype=parents.schema["id"])
    frontier = parents.filter(pl.col("id").is_in(ids.implode())).get_column("parent_id").drop_nulls()
    for _ in range(max_depth):  # one level per pass
        frontier = frontier.unique()
        frontier = frontier.filter(~frontier.is_in(found.implode()))
        if frontier.is_empty():
            break
        found = pl.concat([found, frontier])
        frontier = parents.filter(pl.col("id").is_in(frontier.implode())).get_column("parent_id").drop_nulls()
    return found


def _descendants(parents: pl.DataFrame, ids: pl.Series, max_depth: int) -> pl.Series:
    """Every descendant of the calls ids."""
    found = pl.Series("id", [], dtype=parents.schema["id"])
    frontier = ids
    for _ in range(max_depth):
        frontier = parents.filter(pl.col("parent_id").is_in(frontier.implode())).get_column("id")
        if frontier.is_empty():
            break
        found = pl.concat([found, frontier])
    return found


def innermost_flops(ops: pl.DataFrame, *, max_depth: int = 256) -> pl.DataFrame:
    """Apply the once-only rule to a frame of calls (id, parent_id, flops, bytes).

    A call does work when its formula gives FLOPs > 0. `counted_flops`: a call's FLOPs unless a
    descendant does work (then 0: a composite over its leaves); NULL where it has no formula.
    `counted_bytes`: its bytes unless a descendant does work or an ancestor is a counted unit of
    work (a copy inside addmm moves bytes addmm's lower bound already holds).
    """
    parents = ops.select("id", "parent_id")
    working = ops.filter(pl.col("flops") > 0).get_column("id")
    composite = _ancestors(parents, working, max_depth)
    units = working.filter(~working.is_in(composite.implode()))
    inside = _descendants(parents, units, max_depth)
    has_formula = pl.col("flops").is_not_null()
    return ops.with_columns(
        pl.when(has_formula & pl.col("id").is_in(composite.implode()))
        .then(pl.lit(0, dtype=pl.Int64))
        .otherwise(pl.col("flops"))
        .alias("counted_flops"),
        pl.when(has_formula & pl.col("id").is_in(pl.concat([composite, inside]).implode()))
        .then(pl.lit(0, dtype=pl.Int64))
        .otherwise(pl.col("bytes"))
        .alias("counted_bytes"),
    )


def without_formula(costed: pl.DataFrame) -> pl.DataFrame:
    """The ops of a costed frame (op_costs' output) that have no formula: name and calls, most first.

    These are counted and named, never taken as 0 FLOPs: a report says which ops it could not cost.
    """
    return (
        costed.filter(pl.col("formula").is_null())
        .group_by("name")
        .agg(pl.len().alias("calls"))
        .sort(["calls", "name"], descending=[True, False])
    )
