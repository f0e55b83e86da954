"""What a projection does not know, in words: the data-parallel collectives of a run measured on one
data-parallel rank that can be neither measured nor planned (its data-parallel scaling is refused),
points with less than one sequence per data-parallel rank (flagged), a node capacity assumed
(manifests without node_devices), and a knee that cannot be found (docs/projection.md "What a
projection refuses, flags and cannot say")."""

from __future__ import annotations

from typing import Any

from tracehouse.pipeline.projection.build import RunGraph
from tracehouse.pipeline.projection.scenario import Layout, is_data_parallel, layout_for
from tracehouse.pipeline.projection.timeline import DTYPE_BYTES, RunFacts, RunTimeline


def refusal_notes(refused: dict[int, str]) -> list[str]:
    """One line per reason: "not projected at 64, 2048: why"."""
    by_reason: dict[str, list[int]] = {}
    for size, why in refused.items():
        by_reason.setdefault(why, []).append(size)
    return [f"not projected at {', '.join(map(str, sizes))}: {why}" for why, sizes in by_reason.items()]


def data_parallel_gap(facts: RunFacts, run: RunGraph, timeline: RunTimeline) -> str | None:
    """Why the run's data-parallel collectives at more ranks are unknown, or None when the run
    measured them or they were planned (docs/projection.md "Scenarios")."""
    layout = layout_for(facts, facts.world_size)
    if layout.dp > 1 or any(is_data_parallel(dim, layout) for dim in run.instances.dim):
        return None
    strategy = facts.strategy
    known_dtype = (facts.dtype or "fp32") in DTYPE_BYTES
    if timeline.gpu_ranks:
        why = "tracehouse plans them from CPU (gloo) traces only, not yet from GPU traces"
    elif strategy is None:
        seen = "FSDP hooks (FSDP::*)" if not timeline.fsdp_hooks.is_empty() else "no data-parallel strategy"
        why = (
            "no manifest gives the run's strategy with n_params (ddp) or fsdp_units (fsdp) and dtype, "
            f"and its trace shows {seen}; state them in a manifest.json beside the trace, or when "
            "ingesting it: --strategy, --model (a reference size gives parameters and FSDP units), --dtype"
        )
    elif strategy in ("ddp", "tp") and facts.n_params and known_dtype:
        why = "the trace shows no backward (autograd::engine::evaluate_function:*) to issue them in"
    elif strategy in ("ddp", "tp"):
        why = "its manifest gives no n_params, or no known dtype, to size the gradient all-reduce"
    elif strategy.startswith("fsdp") and facts.fsdp_units and known_dtype:
        why = "the trace shows no FSDP hooks (FSDP::pre_forward, FSDP::post_backward_reduce) to issue them at"
    elif strategy.startswith("fsdp"):
        why = (
            "its manifest records no fsdp_units (parameters per FSDP unit, which tracehouse collect "
            "records) nor a reference model_config to derive them from, or no known dtype"
        )
    elif strategy == "pp" and (facts.model is not None or facts.n_params) and known_dtype:
        why = "the trace shows no micro-batch backward (ScheduleGPipe's `Backward <i>`) to issue them in"
    elif strategy == "pp":
        why = (
            "its manifest gives no reference model_config nor n_params, or no known dtype, to size a "
            "stage's gradients"
        )
    else:
        why = f"tracehouse plans them for ddp, fsdp and tp runs, not {strategy}"
    return (
        f"one data-parallel rank measured, no data-parallel collective to scale, none can be planned: {why}"
    )


def node_size_note(per_node: int, *, from_used: bool) -> str:
    """The node capacity a projection assumed, and why, when no manifest of the study records it."""
    if from_used:
        why = (
            "the study's manifests record no node_devices (the devices a node has), only the devices "
            "its runs used per node (devices_per_node); a node holding more would keep larger groups "
            "on one node"
        )
    else:
        why = "no manifest of the study records node_devices or devices_per_node (a DGX/HGX node assumed)"
    return (
        f"nodes assumed to hold {per_node} devices: {why}; state it with --devices-per-node or a network file"
    )


def batch_flag(facts: RunFacts, layout: Layout, weak_scaling: bool) -> str | None:
    """Why the point is no runnable configuration: under strong scaling, a global batch that
    leaves less than one sequence per data-parallel rank; None when it is, or the batch is unknown."""
    batch = facts.global_batch
    if weak_scaling or batch is None or batch >= layout.dp_new:
        return None
    return (
        f"a global batch of {batch} sequence(s) is less than one per data-parallel rank: no runnable "
        "configuration under strong scaling (--weak-scaling keeps the batch per device)"
    )


def knee_note(facts: RunFacts, rows: list[dict[str, Any]], base_per_device: float | None) -> str:
    """The knee of a run's points in words, or why it cannot be found."""
    if facts.tokens_per_step is None:
        return (
            "knee unknown: no throughput, the run has no tokens per step (its manifest's global_batch "
            "and seq_len, or tokens_per_step)"
        )
    if base_per_device is None:
        return "knee unknown: no measured throughput to compare an added device with"
    knee = next((r["world_size"] for r in rows if r["knee"]), None)
    if knee is not None:
        return f"knee at {knee} devices"
    beyond = [r["world_size"] for r in rows if r["world_size"] > facts.world_size]
    if not beyond:
        return "knee unknown: no world size above the measured one was projected"
    return (
        f"no knee up to {max(beyond)} devices: every added device brings at least half the measured "
        "throughput per device"
    )
