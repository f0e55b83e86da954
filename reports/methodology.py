"""The report's methodology section: METHODOLOGY.md in plain words, the peak FLOP/s table, the power rule."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
from tracehouse.pipeline.common import hardware
from tracehouse.reports.tables import Table, present, query_table

DEFINITIONS: tuple[tuple[str, str], ...] = (
    (
        "Step",
        "one training iteration, marked by the profiler's ProfilerStep#N annotation. On a GPU, a "
        "step's window runs from its first GPU event to the first GPU event of the next step, so waiting "
        "between steps counts in the step before. On a CPU-only run the main thread stands in for the GPU.",
    ),
    (
        "Compute",
        "time in which at least one compute kernel runs (on CPU: self time of non-communication ops).",
    ),
    (
        "Exposed communication",
        "time in which a collective (NCCL/RCCL/gloo) runs and no compute does: "
        "communication that the step waits for. Communication hidden under compute is not counted here.",
    ),
    ("Other", "memory copies and memsets that run while neither compute nor communication does."),
    ("Idle", "the rest of the window: the device has nothing to do (host overhead, data loading, waits)."),
    ("Identity", "compute + exposed communication + other + idle = the step window, on every rank and step."),
    (
        "Step time",
        "the median over measured steps of the slowest rank's step: a synchronous job moves "
        "at its slowest rank.",
    ),
    (
        "Throughput",
        "tokens per step (global batch × sequence length) / step time; per device: "
        "divided by the world size.",
    ),
    (
        "MFU",
        "tokens/s per device × FLOPs per token / peak FLOP/s of the device for its dtype, with FLOPs "
        "per token = 6·N_params + 12·layers·d_model·seq_len. Empty when the peak is unknown (e.g. CPU).",
    ),
    (
        "Scaling efficiency",
        "against the smallest scale point of the study, fixed global batch: "
        "(throughput ratio) / (device ratio). 100 % is linear scaling. The headline measures each "
        "strategy against its own smallest scale point instead (scale_points.strategy_scaling_efficiency); "
        "where several runs share that size, against the best of them.",
    ),
    ("Marginal throughput", "extra tokens/s per extra device between consecutive scale points."),
    (
        "Top kernels and ops",
        "per run, time per rank over the whole trace by name: kernels, copies and memsets on a GPU run; on "
        "a CPU-only run the main thread's ops by self time (an op's duration less its children's), so "
        "MmBackward0 is not counted again in evaluate_function: MmBackward0. The compute ops' self "
        "times add up to the run's compute.",
    ),
    (
        "One mark per run",
        "every chart draws each run on its own (a repeat of a strategy and size is a second bar, point "
        "or line, named by its run id); nothing is summed across runs.",
    ),
    (
        "Exposed share of a collective",
        "every instant of exposed communication is split equally among the communication kernels (on "
        "CPU: gloo spans) in flight then, so the collectives' shares sum to the exposed communication. "
        "Each is named by the host call that launched it: op, process group, parallel dimension (from the "
        "group's mesh name, else the run's layout) and phase (optimizer, backward, forward).",
    ),
    (
        "Wait and transfer",
        "for a collective matched on every rank of its group, its first (duration − transfer) is waiting "
        "for slower ranks and its last transfer (the fastest rank's duration) is moving data; exposed "
        "instants count by where they fall.",
    ),
    (
        "Idle causes (GPU)",
        "an idle gap ends where the next GPU event starts; the part before the host launched that event is "
        "host wait, the rest (queued, not yet started) is device wait; unknown when the launch is not in "
        "the trace.",
    ),
    (
        "Bus bandwidth",
        "a collective's bytes / its transfer time (the fastest rank's duration), times "
        "2(n−1)/n for all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all, 1 otherwise "
        "(the nccl-tests convention).",
    ),
    (
        "Projection",
        "a measured run replayed from its dependencies and durations, then again with more data-parallel "
        "devices, compute scaled with the tokens per device and each collective timed by an alpha-beta "
        "model fitted on network_curves (tracehouse project; docs/projection.md).",
    ),
    (
        "Knee",
        "the smallest projected world size at which the marginal throughput per added device is below "
        "half the run's measured throughput per device.",
    ),
)

DTYPE_ORDER = ["fp8", "bf16", "fp16", "tf32", "fp32", "fp64"]

POWER_RULE = (
    "Energy of a window is the difference of the GPU's cumulative energy counter where the log has one "
    "(NVML total energy, DCGM field 156); otherwise the trapezoid integral of sampled power over the "
    "window. Tokens per joule = tokens of a step / energy of all devices in that step."
)

POWER_METHOD_QUERY = """
SELECT s.run_id, c.source AS power_source,
       CASE s.energy_method WHEN 'counter' THEN 'energy counter difference'
            WHEN 'trapezoid' THEN 'trapezoid integral of power' ELSE s.energy_method END AS energy_from,
       s.avg_power_w_per_device, s.energy_per_step_j
FROM scale_points s
JOIN runs r USING (study, run_id)
LEFT JOIN power_coverage c USING (study, run_id)
WHERE s.study = $1 AND s.avg_power_w_per_device IS NOT NULL
ORDER BY r.strategy, r.world_size, s.run_id
"""


@dataclass(kw_only=True)
class Methodology:
    """What the methodology section prints."""

    definitions: tuple[tuple[str, str], ...]
    peaks_used: Table
    peak_table: Table
    power_rule: str
    power_methods: Table | None


def peaks_used(con: duckdb.DuckDBPyConnection, study: str) -> Table:
    """The peak FLOP/s each run's MFU used, by device (from the runs view)."""
    described = ", ".join(present(con, "runs", ("device_type", "device_name", "dtype")))
    return query_table(
        con,
        "Peak FLOP/s used for MFU in this study",
        f"SELECT DISTINCT {described}, peak_flops / 1e12 AS peak_tflops FROM runs "
        "WHERE study = $1 ORDER BY ALL",
        study,
    )


def peak_table() -> Table:
    """The whole peak FLOP/s table tracehouse knows, one row per device, TFLOP/s per dtype."""
    dtypes = sorted(
        {dtype for by_dtype in hardware.PEAK_FLOPS.values() for dtype in by_dtype}, key=DTYPE_ORDER.index
    )
    rows = [
        [device, *(f"{by_dtype[d] / 1e12:,.1f}" if d in by_dtype else "" for d in dtypes)]
        for device, by_dtype in hardware.PEAK_FLOPS.items()
    ]
    return Table(
        title=f"Peak dense TFLOP/s by device and dtype ({hardware.SOURCE})",
        columns=["device", *dtypes],
        rows=rows,
    )


def power_methods(con: duckdb.DuckDBPyConnection, study: str) -> Table | None:
    """Per run, which power source and which energy rule was used; None when no power was captured."""
    table = query_table(con, "Power data per run", POWER_METHOD_QUERY, study)
    return None if not table.rows else table


def methodology(con: duckdb.DuckDBPyConnection, study: str) -> Methodology:
    """Everything the methodology section shows."""
    return Methodology(
        definitions=DEFINITIONS,
        peaks_used=peaks_used(con, study),
        peak_table=peak_table(),
        power_rule=POWER_RULE,
        power_methods=power_methods(con, study),
    )
