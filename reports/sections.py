"""The report's sections: what each one says and which charts it holds, read from the warehouse."""

from __future__ import annotations

import duckdb
import tracehouse.reports.charts.breakdown as charts_breakdown
import tracehouse.reports.charts.collectives as charts_collectives
import tracehouse.reports.charts.comparison as charts_comparison
import tracehouse.reports.charts.inside as charts_inside
import tracehouse.reports.charts.kernels as charts_kernels
import tracehouse.reports.charts.power as charts_power
import tracehouse.reports.charts.projection as charts_projection
import tracehouse.reports.charts.ranks as charts_ranks
import tracehouse.reports.charts.scaling as charts_scaling
import tracehouse.reports.charts.waits as charts_waits
from tracehouse.pipeline.compare import RunDiff
from tracehouse.reports.html import Figure, Section
from tracehouse.reports.source import frame


def breakdown_section(con: duckdb.DuckDBPyConnection, study: str) -> Section:
    """Compute / exposed communication / other / idle per scale point: the key chart."""
    rows = charts_breakdown.breakdown_rows(con, study)
    return Section(
        id="breakdown",
        title="Where the step time goes",
        intro="Each bar is one run's step time (the median step of its slowest rank), split by the shares of "
        "compute, communication the step waits for, other device work (copies) and idle time over all its "
        "ranks and steps. Red that grows as devices are added means communication is no longer hidden "
        "behind compute.",
        figures=[
            Figure(
                id="fig-breakdown",
                title="Step breakdown (ms)",
                chart=charts_breakdown.step_breakdown_chart(rows),
                grain=charts_breakdown.GRAIN,
            ),
            Figure(
                id="fig-breakdown-share",
                title="Step breakdown (share)",
                chart=charts_breakdown.breakdown_share_chart(rows),
                grain=charts_breakdown.GRAIN,
            ),
        ],
    )


def waits_section(con: duckdb.DuckDBPyConnection, study: str) -> Section:
    """What the step waits for: exposed communication by collective and kind, idle by cause."""
    if not charts_waits.available(con):
        return Section(
            id="waits",
            title="What the step waits for",
            intro="This warehouse predates the attribution of exposed communication and idle time; "
            "rerun tracehouse ingest on the same paths to add it.",
            figures=[],
        )
    return Section(
        id="waits",
        title="What the step waits for",
        intro=charts_waits.headline_sentence(con, study) + WAITS_RULES,
        intro_by_strategy={
            name: charts_waits.headline_sentence(con, study, name) + WAITS_RULES
            for name in _strategies(con, study)
        },
        figures=[
            Figure(
                id="fig-waits-collective",
                title="Exposed communication by collective (ms)",
                chart=charts_waits.collective_chart(charts_waits.collective_rows(con, study)),
                grain=charts_waits.GRAIN,
            ),
            Figure(
                id="fig-waits-kind",
                title="What the waiting is (ms)",
                chart=charts_waits.kind_chart(charts_waits.kind_rows(con, study)),
                grain=charts_waits.GRAIN,
                caption="Wait versus transfer needs each collective matched on every rank of its group; "
                "idle causes need device events (CPU runs have none).",
            ),
        ],
    )


WAITS_RULES = (
    " The bars split the breakdown's exposed communication by the collective behind it (parallel "
    "dimension, op, and the phase that issued it), then by kind: waiting for the slowest rank to "
    "arrive, or moving data; and idle time by cause: the host had not launched the next work yet, or "
    "the work was launched but had not started."
)


def inside_section(con: duckdb.DuckDBPyConnection, study: str) -> Section:
    """Below the step: what holds each scale point's step, its ops on their roofline, its critical path."""
    points = charts_inside.point_rows(con, study)
    return Section(
        id="inside",
        title="Inside the step",
        intro=INSIDE_RULES,
        points=charts_inside.point_sentences(points),
        points_by_strategy={
            name: charts_inside.point_sentences(points, strategy=name) for name in _strategies(con, study)
        },
        figures=[
            Figure(
                id="fig-roofline",
                title="Ops against their roofline",
                chart=charts_inside.roofline_chart(con, study),
                grain=charts_inside.ROOFLINE_GRAIN,
                caption="Up is faster, right is more arithmetic per byte moved. A dash marks the op's "
                "roofline bound on its device (the peak FLOP/s of its dtype, or its intensity times the "
                "memory bandwidth, whichever is lower) and colour the share of it reached; grey points "
                "have no bound (a CPU, or a device without a peak in the table). Ops without FLOPs "
                "(copies, communication, Python wrappers) are not drawn: op_breakdown lists them.",
            ),
            Figure(
                id="fig-critical-path",
                title="The critical path across ranks",
                chart=charts_inside.path_chart(con, study),
                grain=charts_inside.PATH_GRAIN,
                caption="An orange mark (wait) is where the path leaves one rank for another: a "
                "collective on that rank waits for the rank the path goes on. Every segment, with its op, "
                "is in the critical_path view; tracehouse export-trace draws it over the trace in Perfetto.",
            ),
        ],
    )


INSIDE_RULES = (
    "What sets each step's length, one level down. For every run: the make-up of its slowest replayed "
    "step's critical path (the chain of compute, transfers, waits for another rank, host gaps and launch "
    "delays, across ranks, that the step cannot be shorter than), its top op with FLOPs, and how close "
    "its compute runs to the hardware's roofline where the device's peak is known."
)


def _strategies(con: duckdb.DuckDBPyConnection, study: str) -> list[str]:
    """The study's named strategies when it has several (the page's picker offers them), else none."""
    names = frame(
        con, "SELECT DISTINCT strategy FROM runs WHERE study = $1 AND strategy IS NOT NULL ORDER BY 1", study
    )["strategy"].to_list()
    return names if len(names) > 1 else []


def comparison_section(diff: RunDiff) -> Section:
    """Two runs compared: the change per step of each component and of the kernels/ops that moved most."""
    return Section(
        id="comparison",
        title=f"What changed from {diff.a} to {diff.b}",
        intro=charts_comparison.comparison_sentence(diff)
        + " Each bar is the change per step from the first run to the second: the four components sum "
        "to the step-time change; kernels and ops overlap, so theirs do not.",
        figures=[
            Figure(
                id="fig-comparison",
                title="What changed per step (ms)",
                chart=charts_comparison.comparison_chart(diff),
            )
        ],
    )


def scaling_section(con: duckdb.DuckDBPyConnection, study: str) -> Section:
    """Throughput against the ideal, per device, MFU, efficiency and marginal gain."""
    rows = charts_scaling.scaling_rows(con, study)
    mfu_note = None
    if not rows.is_empty() and rows["mfu"].is_null().all():
        mfu_note = "MFU is not shown: the peak FLOP/s of this device is unknown (CPU runs have none)."
    return Section(
        id="scaling",
        title="Throughput and scaling",
        intro="Strong scaling at a fixed global batch: ideal scaling doubles tokens/s with every doubling "
        "of devices (dashed lines) and keeps tokens/s per device flat.",
        figures=[
            Figure(
                id="fig-throughput",
                title="Global throughput",
                chart=charts_scaling.throughput_chart(con, study),
                grain=charts_scaling.GRAIN,
            ),
            Figure(
                id="fig-per-device",
                title="Per device",
                chart=charts_scaling.per_device_chart(con, study),
                grain=charts_scaling.GRAIN,
                caption=mfu_note,
            ),
            Figure(
                id="fig-efficiency",
                title="Scaling efficiency",
                chart=charts_scaling.efficiency_chart(con, study),
                grain=charts_scaling.GRAIN + " Marginal bars: one per run, side by side.",
                caption="As METHODOLOGY.md defines them, efficiency and marginal gain are measured against "
                "the study's smallest scale point (its best run, whatever its strategy); the headline "
                "measures each strategy against its own smallest run instead (both are in the tooltip). "
                "Marginal "
                "throughput below zero means adding devices made the job slower.",
            ),
        ],
    )


# docs/projection.md in a few sentences: what the replay keeps, what a larger world size changes.
REPLAY_RULES = (
    "Each run's measured steps are replayed from their dependencies and measured durations (replaying "
    "the measured durations gives back the measured step times), then replayed again at each world size "
    "with data parallelism grown (data-parallel size = world size / (tp × pp)). With a fixed global "
    "batch, forward and backward compute and copies scale with the tokens per device; data-parallel "
    "collectives keep their bytes over a larger group, tensor- and pipeline-parallel ones keep their "
    "group; host gaps, launch delays and the measured arrival spread stay as measured. Each transfer "
    "comes from an alpha-beta model (latency per ring or tree step plus bytes over bus bandwidth, within "
    "a node or across nodes) fitted on network_curves or read from a network file. The knee is the "
    "smallest world size at which an added device brings less than half the measured throughput per "
    "device; details in docs/projection.md."
)


def projection_section(con: duckdb.DuckDBPyConnection, study: str, warehouse: str) -> Section:
    """Projected throughput per device with the knee, and the projected breakdown; or how to make them."""
    if not charts_projection.available(con, study):
        return Section(
            id="projection",
            title="Projected scaling",
            intro=charts_projection.hint(warehouse, study) + ".",
            figures=[],
        )
    return Section(
        id="projection",
        title="Projected scaling",
        intro=charts_projection.headline_sentence(con, study) + " " + REPLAY_RULES,
        intro_by_strategy={
            name: charts_projection.headline_sentence(con, study, name) + " " + REPLAY_RULES
            for name in _strategies(con, study)
        },
        points=[sentence] if (sentence := charts_projection.ranking_sentence(con, study)) else [],
        figures=[
            Figure(
                id="fig-projection-throughput",
                title="Projected throughput per device",
                chart=charts_projection.throughput_chart(con, study),
                grain="One line per run and scenario, one dot per measured run; one label per knee size.",
                caption="Lines: each run replayed at more devices (one per run and scenario); dots: the "
                "study's measured scale points; diamonds: the knee. "
                + charts_projection.assumptions_sentence(con, study),
            ),
            Figure(
                id="fig-projection-breakdown",
                title="Projected step breakdown",
                chart=charts_projection.breakdown_chart(con, study),
                grain="One panel per strategy's largest measured run, one bar per projected world size.",
                caption="The largest measured run of each strategy: its replayed step split into compute, "
                "exposed communication, other and idle at each projected world size.",
            ),
        ],
    )


def power_section(con: duckdb.DuckDBPyConnection, study: str) -> Section:
    """Power per device and tokens per joule, or why they are missing."""
    return Section(
        id="power",
        title="Power and energy",
        figures=[
            Figure(
                id="fig-power",
                title="Power and energy",
                chart=charts_power.power_chart(con, study),
                grain="One point per run.",
                details=charts_power.power_details(con, study),
                details_title="What the power tools said",
            ),
        ],
    )


def detail_sections(con: duckdb.DuckDBPyConnection, study: str) -> list[Section]:
    """Collective bandwidth, stragglers and top kernels."""
    return [
        Section(
            id="collectives",
            title="Collective bandwidth",
            intro="Bus bandwidth of matched collective "
            "instances against message size; small messages are latency-bound, large ones approach "
            "the link's bandwidth.",
            figures=[
                Figure(
                    id="fig-busbw",
                    title="Bus bandwidth",
                    chart=charts_collectives.busbw_chart(con, study),
                    grain=charts_collectives.GRAIN,
                )
            ],
        ),
        Section(
            id="stragglers",
            title="Stragglers at the largest scale",
            intro="Step time of every rank and step at each strategy's largest scale point, against its "
            "run's median step: an orange row is a slow rank that the whole job waits for.",
            figures=[
                Figure(
                    id="fig-ranks",
                    title="Per-rank step time",
                    chart=charts_ranks.rank_heatmap_chart(con, study),
                    grain=charts_ranks.GRAIN,
                )
            ],
        ),
        Section(
            id="kernels",
            title="Top kernels and ops",
            intro="Where device time goes by name, per run (on CPU-only runs: the ops of the main thread, "
            "by self time, so an op nested in another is not counted twice).",
            figures=[
                Figure(
                    id="fig-kernels",
                    title="Top kernels",
                    chart=charts_kernels.top_kernels_chart(con, study),
                    grain=charts_kernels.GRAIN,
                )
            ],
        ),
    ]
