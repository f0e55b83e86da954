"""What a projected layout needs in memory per device, against what the device has.

Per device, for the run's model (the manifest's n_params and dtype) at the projected layout:
* parameters: n_params x dtype bytes / (tp x pp); FSDP shards them over the data-parallel degree
  too, and holds one unit whole while it computes (its largest unit from the manifest's
  fsdp_units; without them, none is counted);
* gradients: as many bytes as the parameters, sharded as they are;
* optimizer state (AdamW, what `tracehouse collect` trains with): two fp32 moments per parameter,
  and an fp32 master copy where the parameters are 16-bit, sharded as the parameters are;
* activations: the run's measured peak of allocated bytes (step_memory: its largest rank and
  step) less its model state at the measured layout, scaled with the tokens per device (strong
  scaling: dp / dp_new); a pipeline's stage keeps its share of the layers' activations for the
  micro-batches in flight: all of them under GPipe, at most pp under 1F1B (the first stage's
  warm-up). A trace without memory events gives none: the need is then a lower bound, and says so.
The capacity is the scenario's `device_memory`, else the network description's, else the device's
memory (hardware.device_memory_bytes, by the run's device name); unknown for a CPU. A point whose
need exceeds it is flagged and never ranked by `--search` (docs/projection.md, "Memory per device").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import duckdb
from tracehouse.pipeline.common.hardware import device_memory_bytes
from tracehouse.pipeline.projection.network import NetworkModel
from tracehouse.pipeline.projection.results import ProjectedPoint
from tracehouse.pipeline.projection.scenario import Layout, Scenario, tokens_factor
from tracehouse.pipeline.projection.timeline import DTYPE_BYTES, RunFacts

ADAM_MOMENT_BYTES = 2 * 4  # exp_avg and exp_avg_sq in fp32
MASTER_BYTES = 4  # the fp32 copy of 16-bit parameters


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes per device of one projected point, by part; activations None where not measured."""

    params: float
    grads: float
    optimizer: float
    activations: float | None
    capacity: float | None

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + (self.activations or 0.0)

    @property
    def fits(self) -> bool | None:
        return None if self.capacity is None else self.total <= self.capacity

    def flag(self) -> str | None:
        """The flag of a point that does not fit (None when it fits or the capacity is unknown)."""
        if self.fits is not False:
            return None
        bound = "" if self.activations is not None else " without activations"
        return f"does not fit: needs {_gb(self.total)} per device{bound}, the device has {_gb(self.capacity)}"


def _gb(n: float | None) -> str:
    """Bytes in GB, MB or kB (powers of ten, as the datasheets count)."""
    if n is None:
        return "?"
    for unit, size in (("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n / 1e3:,.1f} kB"


def model_state(
    facts: RunFacts, dp: int, sharded: bool, tp: int | None = None, pp: int | None = None
) -> tuple[float, float, float] | None:
    """Parameters, gradients and optimizer state in bytes per device at data-parallel degree dp,
    tensor-parallel degree tp and pipeline-parallel degree pp (None: the run's; a stage holds
    1 / pp of the parameters); None without n_params or a known dtype."""
    width = DTYPE_BYTES.get(facts.dtype or "")
    if not facts.n_params or width is None:
        return None
    split = (tp or facts.tp or 1) * (pp or facts.pp or 1)
    per_rank = facts.n_params / split
    shard = per_rank / dp if sharded else per_rank
    # the largest unit, stated per rank at the run's tp, at the new tp
    unit = max(facts.fsdp_units.values(), default=0) * (facts.tp or 1) / (tp or facts.tp or 1)
    whole_unit = unit * width if sharded else 0.0
    optimizer = shard * (ADAM_MOMENT_BYTES + (MASTER_BYTES if width < 4 else 0))
    return shard * width + whole_unit, shard * width, optimizer


def measured_peak(connection: duckdb.DuckDBPyConnection, study: str, run_id: str) -> float | None:
    """The run's largest allocated bytes at any instant of a step on any rank (None: no memory events)."""
    (peak,) = connection.execute(
        "SELECT max(peak_allocated_bytes) FROM step_memory WHERE study = ? AND run_id = ?", [study, run_id]
    ).fetchall()[0]
    return float(peak) if peak else None


def memory_need(
    facts: RunFacts,
    *,
    dp: int,
    dp_new: int,
    sharded: bool,
    tokens: float,
    peak: float | None,
    capacity: float | None,
    measured_sharded: bool | None = None,
    tp_new: int | None = None,
    pp_new: int | None = None,
    in_flight: float = 1.0,
) -> MemoryNeed | None:
    """The need per device at dp_new (sharded: FSDP), tp_new and pp_new (None: the run's; a
    stage keeps its share of the layers' activations for `in_flight`, the share of the step's
    micro-batches it holds at once: 1 under GPipe, each micro-batch's until its backward); tokens is
    the tokens-per-device factor against the measured layout; peak the measured peak
    (`measured_peak`), of a run that sharded (measured_sharded, default: as projected) or not;
    capacity the device's memory (or None)."""
    state = model_state(facts, dp_new, sharded, tp_new, pp_new)
    measured = model_state(facts, dp, sharded if measured_sharded is None else measured_sharded)
    if state is None or measured is None:
        return None
    stages = (facts.pp or 1) / (pp_new or facts.pp or 1)
    activations = None if peak is None else max(0.0, peak - sum(measured)) * tokens * stages * in_flight
    return MemoryNeed(*state, activations=activations, capacity=capacity)


def device_capacity(
    facts: RunFacts, scenario: Scenario, network: NetworkModel | None
) -> tuple[float | None, str | None]:
    """The memory of each projected device (bytes) and where it came from: the scenario's
    `device_memory` ("stated"), the network description's ("network file"), else the run's
    device's ("device table"); (None, None) when none says (a CPU run)."""
    if scenario.device_memory is not None:
        return scenario.device_memory, "stated"
    if network is not None and network.device_memory is not None:
        return network.device_memory, "network file"
    table = device_memory_bytes(facts.device_name)
    return table, None if table is None else "device table"


def in_flight(layout: Layout) -> float:
    """The share of a projected pipeline's micro-batches whose activations its first stage holds at
    once: all under GPipe, pp of them under 1F1B (1 without a projected pipeline)."""
    if layout.schedule != "1f1b" or not layout.microbatches or not layout.pp_new:
        return 1.0
    return min(layout.microbatches, layout.pp_new) / layout.microbatches


def with_memory(
    p: ProjectedPoint,
    facts: RunFacts,
    layout: Layout,
    scenario: Scenario,
    peak: float | None,
    capacity: float | None,
) -> ProjectedPoint:
    """The point with its memory per device, flagged where it does not fit."""
    need = memory_need(
        facts,
        dp=layout.dp,
        dp_new=layout.dp_new,
        sharded=layout.sharded_optimizer,
        tokens=tokens_factor(layout, scenario),
        peak=peak,
        capacity=capacity,
        measured_sharded=layout.measured_sharded,
        tp_new=layout.tp_target,
        pp_new=layout.pp_target,
        in_flight=in_flight(layout),
    )
    if need is None:
        return replace(p, memory_capacity_bytes=capacity)
    flag = "; ".join(f for f in (p.flag, need.flag()) if f) or None
    return replace(p, memory_bytes=need.total, memory_capacity_bytes=capacity, flag=flag)
