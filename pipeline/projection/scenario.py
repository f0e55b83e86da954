"""Scenarios: what a projection changes before it replays a run, as one weight per graph edge.

* compute: `compute_speedup` divides every compute cost, `matmul_speedup` the matmul/attention
  kernels once more; `memory_speedup` divides copies and memsets;
* network: collective transfers come from the network model (a file, or the calibration fit) at
  the projected group size; `ideal_network` makes every transfer zero (waits for slower ranks
  remain: they are arrival spread, not network);
* data-parallel world size (strong scaling at fixed global batch by default, weak scaling at fixed
  per-device batch): forward/backward compute scales with the tokens per device; optimizer work
  stays per device under DDP (replicated) and shrinks with the shard under FSDP; data-parallel
  collectives keep their bytes (DDP's gradient all-reduce; FSDP's all-gather and reduce-scatter of
  each unit, recorded at the unit's full size) and span the new data-parallel degree; tensor- and
  pipeline-parallel collectives keep their group and carry activations, which follow the tokens
  per device. Host gaps and launch delays never change;
* tensor parallelism added to a run without it (`tensor_parallel`): the split ops (matmul,
  attention) at 1/tp of their FLOPs, timed by the study's efficiency curves (efficiency.py); the
  gradients, optimizer work and data-parallel bytes a rank holds / tp; the layers' collectives
  planned (synthetic.py) and timed at tp ranks.

Each collective's level (intra- or inter-node) comes from where its group sits, never from its
size: at the measured layout from the ranks' hosts (traces), else on the projected (dp, tp x pp)
mesh (rank = dp index x tp x pp + model-parallel index, tp innermost, as `tracehouse collect`
builds it) with ranks filling nodes of the network's devices_per_node (`group_ranks`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tracehouse.pipeline.common.comm_names import dtype_name, dtype_size
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.buckets import regrouped, step_groups
from tracehouse.pipeline.projection.build import RunGraph
from tracehouse.pipeline.projection.efficiency import split_factors
from tracehouse.pipeline.projection.graph import Cost, Phase
from tracehouse.pipeline.projection.layouts import (
    DEFAULT_SCHEDULE,
    SCHEDULE_NAMES,
    SCHEDULES,
    Pipeline,
    data_parallel_kind,
)
from tracehouse.pipeline.projection.network import Link, NetworkModel, Placement, packed_hosts, place_group
from tracehouse.pipeline.projection.timeline import DATA_PARALLEL_DIMS, RunFacts

# The collectives that reduce gradients (what gradient compression shrinks) and the element types a
# lower-precision collective may replace (comm_names' names).
GRADIENT_REDUCTIONS = ("all_reduce", "reduce_scatter")
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """What changes; the defaults change nothing but the world size."""

    compute_speedup: float = 1.0
    matmul_speedup: float = 1.0
    memory_speedup: float = 1.0
    ideal_network: bool = False
    weak_scaling: bool = False
    interference: bool = True  # transfers stretch under overlap (projection/interference.py)
    grad_compression: float = 1.0  # data-parallel gradient reductions move bytes / this
    comm_dtype: str | None = None  # collectives move this element type (comm_names.dtype_name)
    device_memory: float | None = None  # bytes per device (None: the run's device's, projection/memory.py)
    bucket_bytes: float | None = None  # DDP's gradient buckets regrouped to this size (projection/buckets.py)
    data_parallel: str | None = None  # "ddp" or "fsdp": the data-parallel kind projected (None: the run's)
    tensor_parallel: int | None = None  # the tensor-parallel degree projected (None: the run's)
    pipeline_parallel: int | None = None  # the pipeline-parallel degree projected (None: the run's)
    microbatches: int | None = (
        None  # the pipeline's micro-batches per step (None: tracehouse collect's default)
    )
    schedule: str | None = None  # the pipeline's schedule (layouts.SCHEDULES; None: tracehouse collect's)

    def __post_init__(self) -> None:
        if self.data_parallel not in (None, "ddp", "fsdp"):
            raise TracehouseError(f"data-parallel kind {self.data_parallel!r} is not ddp or fsdp")
        if self.tensor_parallel is not None and self.tensor_parallel < 1:
            raise TracehouseError("the tensor-parallel degree must be a positive integer")
        if self.pipeline_parallel is not None and self.pipeline_parallel < 1:
            raise TracehouseError("the pipeline-parallel degree must be a positive integer")
        if self.microbatches is not None and (self.microbatches < 1 or (self.pipeline_parallel or 1) == 1):
            raise TracehouseError(
                "microbatches must be a positive integer, with pipeline parallelism (pp > 1)"
            )
        if self.schedule is not None and (
            self.schedule not in SCHEDULES or (self.pipeline_parallel or 1) == 1
        ):
            raise TracehouseError(
                f"the schedule must be one of {', '.join(SCHEDULES)}, with pipeline parallelism (pp > 1)"
            )
        for name in ("compute_speedup", "matmul_speedup", "memory_speedup", "grad_compression"):
            if not getattr(self, name) > 0:
                raise TracehouseError(f"{name.replace('_', '-')} must be > 0")
        if self.device_memory is not None and not self.device_memory > 0:
            raise TracehouseError("device-memory must be > 0")
        if self.bucket_bytes is not None and not self.bucket_bytes > 0:
            raise TracehouseError("bucket-mb must be > 0")
        if self.comm_dtype is not None and dtype_size(dtype_name(self.comm_dtype) or "") is None:
            raise TracehouseError(
                f"comm-dtype {self.comm_dtype!r} is no element type tracehouse knows "
                "(e.g. fp32, bf16, fp16, fp8)"
            )

    def measurable(self) -> Scenario:
        """The scenario without its what-ifs: what a measured run can check (the world size, the
        data-parallel kind, weak scaling, the interference and the network stay)."""
        return replace(
            self,
            compute_speedup=1.0,
            matmul_speedup=1.0,
            memory_speedup=1.0,
            ideal_network=False,
            grad_compression=1.0,
            comm_dtype=None,
            bucket_bytes=None,
        )

    def bytes_factor(self, op: str | None, data_parallel: bool, measured_dtype: str | None) -> float:
        """What the scenario does to a collective's bytes: gradient reductions (data-parallel
        all-reduce and reduce-scatter) / grad_compression; every collective of a known float element
        type x comm_dtype's size / its own (parameters' all-gathers are not gradients)."""
        factor = 1.0
        if data_parallel and op in GRADIENT_REDUCTIONS:
            factor /= self.grad_compression
        if self.comm_dtype is not None and measured_dtype in FLOAT_DTYPES:
            factor *= dtype_size(dtype_name(self.comm_dtype)) / dtype_size(measured_dtype)
        return factor

    def short_name(self, network_file: Path | None) -> str:
        """A name from what the scenario changes ("baseline" when nothing), e.g. compute-x2+ideal-network."""
        parts = [
            f"{label}-x{factor:g}"
            for label, factor in (
                ("compute", self.compute_speedup),
                ("matmul", self.matmul_speedup),
                ("copies", self.memory_speedup),
            )
            if factor != 1
        ]
        if self.ideal_network:
            parts.append("ideal-network")
        elif network_file is not None:
            parts.append(f"network-{network_file.stem}")
        if self.grad_compression != 1:
            parts.append(f"grad-compression-x{self.grad_compression:g}")
        if self.comm_dtype is not None:
            parts.append(f"comm-{self.comm_dtype}")
        if self.device_memory is not None:
            parts.append(f"device-memory-{self.device_memory / 1e9:g}GB")
        if self.bucket_bytes is not None:
            parts.append(f"bucket-{self.bucket_bytes / 1e6:g}MB")
        if self.data_parallel is not None:
            parts.append(f"as-{self.data_parallel}")
        if self.tensor_parallel is not None:
            parts.append(f"tp{self.tensor_parallel}")
        if self.pipeline_parallel is not None:
            parts.append(f"pp{self.pipeline_parallel}")
        if self.microbatches is not None:
            parts.append(f"mb{self.microbatches}")
        if self.schedule not in (None, DEFAULT_SCHEDULE):
            parts.append(self.schedule)
        if self.weak_scaling:
            parts.append("weak")
        if not self.interference:
            parts.append("no-interference")
        return "+".join(parts) or "baseline"

    def describe(self, network: NetworkModel | None) -> str:
        """The assumptions in words (stored with every projection, printed by the report)."""
        parts = [
            "weak scaling (fixed per-device batch)"
            if self.weak_scaling
            else "strong scaling (fixed global batch)"
        ]
        if self.compute_speedup != 1:
            parts.append(f"compute x{self.compute_speedup:g}")
        if self.matmul_speedup != 1:
            parts.append(f"matmul/attention x{self.matmul_speedup:g}")
        if self.memory_speedup != 1:
            parts.append(f"copies x{self.memory_speedup:g}")
        if self.grad_compression != 1:
            parts.append(
                f"gradient reductions compressed x{self.grad_compression:g} (data-parallel all-reduce and "
                "reduce-scatter bytes)"
            )
        if self.comm_dtype is not None:
            parts.append(
                f"collectives in {dtype_name(self.comm_dtype)} (float collectives' bytes by element size)"
            )
        if self.device_memory is not None:
            parts.append(f"devices of {self.device_memory / 1e9:g} GB")
        if self.bucket_bytes is not None:
            parts.append(f"DDP gradient buckets of {self.bucket_bytes / 1e6:g} MB")
        if self.data_parallel is not None:
            parts.append(
                f"data parallelism as {self.data_parallel.upper()} (where the run's is the other kind: "
                "its collectives planned, the measured data-parallel ones dropped)"
            )
        if self.tensor_parallel is not None:
            parts.append(
                f"tensor parallelism of degree {self.tensor_parallel} (where the run has none: its matmul "
                "and attention ops split, their time from the study's efficiency curves, the layers' "
                "all-reduces and the logits' all-gather planned)"
            )
        if self.pipeline_parallel is not None:
            batches = self.microbatches or "tracehouse collect's"
            order = SCHEDULE_NAMES[self.schedule or DEFAULT_SCHEDULE]
            parts.append(
                f"pipeline parallelism of degree {self.pipeline_parallel} with {batches} micro-batches "
                f"(where the run has none: its layers cut into stages, replayed per micro-batch in {order}'s "
                "order, split ops timed by the study's efficiency curves, other compute by its "
                "tokens, host gaps per micro-batch, activations sent between stages)"
            )
        if self.ideal_network:
            parts.append("ideal network (zero transfer time)")
        elif network is not None:
            parts.append(f"network from {network.source}, {network.devices_per_node} devices per node")
        if not self.interference:
            parts.append("no interference (transfers at their network time and level, overlapped or not)")
        return "; ".join(parts)


@dataclass(frozen=True)
class Layout:
    """The measured run's degrees, the projected data-parallel degree and kind, and tp."""

    strategy: str | None
    world_size: int
    dp: int
    model_parallel: int  # tp x pp
    dp_new: int
    kind_new: str | None = None  # "ddp" or "fsdp" projected (None: the measured run's)
    tp: int = 1  # the measured tensor-parallel degree
    tp_new: int | None = None  # the projected one where it differs (a run without tensor parallelism)
    pp_new: int | None = None  # the projected pipeline-parallel degree where it differs (a run without)
    microbatches: int | None = None  # the projected pipeline's micro-batches (with pp_new)
    schedule: str | None = None  # the projected pipeline's schedule (with pp_new)

    @property
    def pp(self) -> int:
        """The measured pipeline-parallel degree."""
        return self.model_parallel // self.tp

    @property
    def pp_target(self) -> int:
        return self.pp_new or self.pp

    @property
    def changes_pp(self) -> bool:
        return self.pp_target != self.pp

    @property
    def changes_layout(self) -> bool:
        """Whether the projected layout is another than the measured one at any world size."""
        return self.changes_kind or self.changes_tp or self.changes_pp

    @property
    def tp_target(self) -> int:
        return self.tp_new or self.tp

    @property
    def changes_tp(self) -> bool:
        return self.tp_target != self.tp

    @property
    def model_parallel_new(self) -> int:
        """tp x pp projected."""
        return self.tp_target * self.pp_target

    @property
    def world_size_new(self) -> int:
        return self.dp_new * self.model_parallel_new

    @property
    def kind(self) -> str:
        """The projected data-parallel kind (layouts.data_parallel_kind)."""
        return self.kind_new or data_parallel_kind(self.strategy)

    @property
    def changes_kind(self) -> bool:
        """Whether the projection swaps the run's data-parallel kind (DDP as FSDP, or back)."""
        return self.kind != data_parallel_kind(self.strategy)

    @property
    def sharded_optimizer(self) -> bool:
        """Whether the projected ranks shard parameters, gradients and optimizer state (FSDP)."""
        return self.kind == "fsdp"

    @property
    def measured_sharded(self) -> bool:
        return data_parallel_kind(self.strategy) == "fsdp"


def layout_at_measured(layout: Layout) -> Layout:
    """The measured layout of the run a layout projects."""
    return replace(layout, dp_new=layout.dp)


def layout_for(
    facts: RunFacts,
    world_size: int,
    kind: str | None = None,
    tp: int | None = None,
    pipeline: Pipeline | tuple[int, int | None] | None = None,
) -> Layout:
    """The projected layout: the world grows along data parallelism, of data-parallel `kind`
    (None: the run's own), with tensor-parallel degree `tp` (None: the run's own) and `pipeline`'s
    (pp, micro-batches) (None: the run's own)."""
    measured_tp, pp = facts.tp or 1, facts.pp or 1
    tp_new = tp if tp is not None and tp != measured_tp else None
    pp_new, microbatches, schedule = (
        Pipeline(*pipeline) if pipeline is not None and pipeline[0] != pp else (None, None, None)
    )
    split = (tp_new or measured_tp) * (pp_new or pp)
    if world_size % split:
        whose = "the layout's" if tp_new or pp_new else "the run's"
        raise TracehouseError(
            f"world size {world_size} is not a multiple of {whose} tp x pp = {split} "
            f"({facts.study}/{facts.run_id})"
        )
    dp, dp_new = facts.data_parallel, world_size // split
    return Layout(
        facts.strategy,
        facts.world_size,
        dp,
        measured_tp * pp,
        dp_new,
        kind,
        measured_tp,
        tp_new,
        pp_new,
        microbatches,
        schedule,
    )


@dataclass(frozen=True)
class Transfers:
    """Each matched instance's transfer (ns) under a scenario, the source of the network link
    that timed it (`Link.source`; None where the measured transfer was kept or zeroed), and
    whether the scenario drops it (a measured data-parallel collective of the kind it swaps)."""

    ns: np.ndarray
    source: list[str | None]
    dropped: np.ndarray


def edge_weights(
    run: RunGraph,
    layout: Layout,
    scenario: Scenario,
    network: NetworkModel | None,
    hosts: Mapping[int, Hashable | None] | None = None,
    transfer_factors: np.ndarray | None = None,
) -> np.ndarray:
    """One weight per edge of the run's graph under the scenario (ns); hosts is the measured
    run's rank -> host map (traces.host), used at the measured layout; `transfer_factors`
    multiply each instance's transfer (the interference model)."""
    transfers = instance_transfers(run, layout, scenario, network, hosts or {})
    factors = 1.0 if transfer_factors is None else transfer_factors
    return with_transfers(
        run, scaled_weights(run, layout, scenario), transfers.ns * factors, transfers.dropped
    )


def tokens_factor(layout: Layout, scenario: Scenario) -> float:
    """How the work per device follows the tokens per device: dp / dp_new under strong scaling."""
    return 1.0 if scenario.weak_scaling else layout.dp / layout.dp_new


def scaled_weights(run: RunGraph, layout: Layout, scenario: Scenario) -> np.ndarray:
    """Every edge's weight under the scenario but the transfers' (left at their fixed parts)."""
    g = run.graph
    tokens = tokens_factor(layout, scenario) / run.tokens_scale
    optimizer = (layout.dp if layout.measured_sharded else 1) / (
        layout.dp_new if layout.sharded_optimizer else 1
    )
    optimizer *= layout.tp / layout.tp_target  # the parameters a rank holds
    phase_factor = np.where(g.phase == Phase.OPTIMIZER, optimizer, tokens)
    factor = np.ones(len(g.cost))
    factor[g.cost == Cost.COMPUTE_MATMUL] = 1.0 / (scenario.compute_speedup * scenario.matmul_speedup)
    factor[g.cost == Cost.COMPUTE_OTHER] = 1.0 / scenario.compute_speedup
    factor[g.cost == Cost.MEMORY] = 1.0 / scenario.memory_speedup
    compute_like = np.isin(g.cost, (Cost.COMPUTE_MATMUL, Cost.COMPUTE_OTHER, Cost.MEMORY))
    factor[compute_like] *= phase_factor[compute_like]
    if layout.changes_tp:  # the split ops at their share of the FLOPs (efficiency.py)
        factor *= split_factors(run.curves, g.split_class, g.split_flops, layout.tp / layout.tp_target)
    weights = g.fixed + g.base * factor
    if layout.changes_kind and layout.measured_sharded:  # FSDP as DDP: FSDP's own work is gone
        weights[g.phase == Phase.FSDP_HOOK] = 0.0
    local = g.cost == Cost.COMM_LOCAL
    if scenario.ideal_network:
        weights[local] = g.fixed[local]
    return weights


def with_transfers(
    run: RunGraph, weights: np.ndarray, transfer_ns: np.ndarray, dropped: np.ndarray | None = None
) -> np.ndarray:
    """The weights with each transfer edge set to its fixed part plus its instance's transfer: a
    planned instance's members all end at its arrival plus its transfer (no measured residual), a
    dropped instance's edges from its arrival never win (its members end where they start)."""
    g = run.graph
    out = weights.copy()
    is_transfer = g.cost == Cost.TRANSFER
    instance = g.instance[is_transfer]
    fixed = np.where(run.planned[instance], 0.0, g.fixed[is_transfer])
    value = fixed + transfer_ns[instance]
    if dropped is not None:
        value = np.where(dropped[instance], -np.inf, value)
    out[is_transfer] = value
    return out


def instance_transfers(
    run: RunGraph,
    layout: Layout,
    scenario: Scenario,
    network: NetworkModel | None,
    hosts: Mapping[int, Hashable | None],
) -> Transfers:
    """Each matched instance's transfer (ns) under the scenario."""
    inst = run.instances
    out = np.array(run.transfer_ns, dtype=np.float64)
    sources: list[str | None] = [None] * len(out)
    dropped = np.zeros(len(out), dtype=bool)
    if layout.changes_kind:
        dims = [is_data_parallel(dim, layout) for dim in inst.dim]
        dropped[: len(dims)] = np.array(dims, dtype=bool) & ~run.planned[: len(dims)]
    tokens = tokens_factor(layout, scenario) / run.tokens_scale
    targets = [instance_target(run, i, layout, scenario, tokens) for i in range(len(inst.transfer_ns))]
    if layout.changes_tp or layout.changes_pp:  # a data-parallel group of one rank at the new layout: none
        alone = [dp and n_new == 1 for n_new, _, dp in targets]
        dropped[: len(alone)] |= np.array(alone, dtype=bool)
    if scenario.ideal_network:
        return Transfers(np.zeros_like(out), sources, dropped)

    def timed(i: int, size: float) -> tuple[float, Link] | None:
        if network is None or size <= 0:
            return None
        ranks = [rank for rank, _, _ in inst.members[i]]
        n_new = targets[i][0]
        placement = group_placement(ranks, inst.dim[i], n_new, layout, hosts, network.devices_per_node)
        return network.timed(inst.op[i], size, n_new, placement)

    for i, measured in enumerate(inst.transfer_ns):
        if dropped[i]:
            out[i] = 0.0
            continue
        n_new, size, data_parallel = targets[i]
        n = inst.group_size[i] or len(inst.members[i])
        found = timed(i, size)
        if found is not None:
            out[i] = found[0] * 1e3
            sources[i] = found[1].source
        elif not data_parallel:
            out[i] = measured * tokens
        elif n_new != n:
            raise TracehouseError(
                f"no network calibration for {inst.op[i]} across {n_new} ranks: ingest nccl-tests output "
                "(or `tracehouse calibrate`), or pass --network FILE (Python: network=)"
            )
    if scenario.bucket_bytes is not None and layout.kind == "ddp" and network is not None:
        gradients = [
            i for i, (_, _, dp) in enumerate(targets) if dp and inst.op[i] == "all_reduce" and not dropped[i]
        ]
        for group in step_groups(run, gradients):
            carried = regrouped([targets[i][1] for i in group], scenario.bucket_bytes)
            for i, sizes in zip(group, carried, strict=True):
                found = [t for t in (timed(i, size) for size in sizes) if t is not None]
                out[i] = sum(ns for ns, _ in found) * 1e3
                sources[i] = found[0][1].source if found else None
    return Transfers(out, sources, dropped)


def instance_target(
    run: RunGraph, i: int, layout: Layout, scenario: Scenario, tokens: float
) -> tuple[int, float, bool]:
    """An instance's projected group size, its bytes under the scenario, and whether it is data-parallel."""
    inst = run.instances
    n = inst.group_size[i] or len(inst.members[i])
    data_parallel = is_data_parallel(inst.dim[i], layout)
    if data_parallel:
        whole = inst.dim[i] == "world" and not (
            layout.changes_tp or layout.changes_pp
        )  # nor with new tp / pp
        n_new = layout.world_size_new if whole else max(1, n * layout.dp_new // layout.dp)
        size = float(inst.bytes[i] or 0) * layout.tp / layout.tp_target  # the gradients a rank holds
    else:
        n_new, size = n, float(inst.bytes[i] or 0) * tokens
    return n_new, size * scenario.bytes_factor(inst.op[i], data_parallel, inst.dtype[i]), data_parallel


def is_data_parallel(dim: str, layout: Layout) -> bool:
    """Whether an instance's group grows with the data-parallel degree."""
    if dim in DATA_PARALLEL_DIMS:
        return True
    return dim == "unknown" and layout.model_parallel == 1


def group_placement(
    ranks: list[int],
    dim: str,
    n_new: int,
    layout: Layout,
    hosts: Mapping[int, Hashable | None],
    devices_per_node: int,
) -> Placement | None:
    """Where an instance's projected group sits: on the measured hosts when the layout is the
    measured one and every rank's host is known, else on the projected mesh packed into nodes
    of devices_per_node (None when the group's ranks are unknown)."""
    if layout.world_size_new == layout.world_size and len(ranks) == n_new:
        measured = place_group(ranks, hosts)
        if measured is not None:
            return measured
    projected = group_ranks(ranks, dim, n_new, layout)
    if not projected:
        return None
    return place_group(projected, packed_hosts(layout.world_size_new, devices_per_node))


def group_ranks(ranks: list[int], dim: str, n_new: int, layout: Layout) -> list[int]:
    """The ranks of the instance's group in the projected (dp, tp x pp) mesh: the whole world for
    a world group; a data-parallel group keeps its first rank's model-parallel index and its
    stride (tp x pp when it was seen on one rank) over n_new members; a model-parallel group
    keeps its ranks, moved into the first data-parallel replica when the world shrinks."""
    world = layout.world_size_new
    if dim == "world" or n_new >= world:
        return list(range(world))
    if not ranks:
        return []
    ordered = sorted(set(ranks))
    if is_data_parallel(dim, layout):
        stride = ordered[1] - ordered[0] if len(ordered) > 1 else layout.model_parallel_new
        first = ordered[0]
        if first + (n_new - 1) * stride >= world:
            first %= stride
        return [first + j * stride for j in range(n_new)]
    if ordered[-1] >= world:
        return sorted({rank % layout.model_parallel_new for rank in ordered})
    if len(ordered) < n_new:  # a planned tensor-parallel group (synthetic.py): consecutive ranks
        first = ordered[0] - ordered[0] % n_new
        return list(range(first, min(first + n_new, world)))
    return ordered
