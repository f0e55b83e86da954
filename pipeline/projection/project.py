"""Project a measured run to other world sizes under a scenario, and check the replay itself.

`project_run` replays the run once with its measured durations (the identity check: the replayed
step times against the measured ones), then once per world size with the scenario's weights; each
point is summarized by the METHODOLOGY breakdown of the replayed steps. `store_projections`
writes the rows into the warehouse's `projections` table, replacing earlier rows of the same
run and scenario in one transaction.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from statistics import median
from typing import Any, NamedTuple

import duckdb
import numpy as np
from tracehouse.collectors.spec import default_microbatches
from tracehouse.pipeline.common.errors import TracehouseError, WarehouseError
from tracehouse.pipeline.projection.band import (
    Band,
    Check,
    read_checks,
    store_checks,
    study_band,
    with_layout_error,
)
from tracehouse.pipeline.projection.breakdown import DIMENSIONS, ReplayedRun, summarize
from tracehouse.pipeline.projection.build import RunGraph, build_run_graph
from tracehouse.pipeline.projection.critical_rows import StudyPaths, built_run, store_paths
from tracehouse.pipeline.projection.efficiency import category_curves, study_curves
from tracehouse.pipeline.projection.graph import GraphCycleError
from tracehouse.pipeline.projection.interference import (
    FitSamples,
    Interference,
    add_samples,
    compute_overlaps,
    device_type,
    instance_overlaps,
    store_fits,
    stored_fits,
    unfitted,
)
from tracehouse.pipeline.projection.layouts import (
    DEFAULT_SCHEDULE,
    SCHEDULES,
    Pipeline,
    data_parallel_kind,
    layout_text,
    strategy_as,
)
from tracehouse.pipeline.projection.memory import device_capacity, measured_peak, with_memory
from tracehouse.pipeline.projection.network import (
    LINK_SOURCES,
    NetworkModel,
    calibrated_network,
    load_network_file,
    rank_hosts,
)
from tracehouse.pipeline.projection.results import (
    IdentityCheck,
    ProjectedPoint,
    Projections,
    RunProjection,
)
from tracehouse.pipeline.projection.scenario import (
    Layout,
    Scenario,
    instance_transfers,
    layout_at_measured,
    layout_for,
    scaled_weights,
    tokens_factor,
    with_transfers,
)
from tracehouse.pipeline.projection.search import measured_power
from tracehouse.pipeline.projection.stages import build_pipeline_graph
from tracehouse.pipeline.projection.timeline import (
    LoadedRuns,
    RunFacts,
    RunTimeline,
    reference_model,
    run_facts,
)
from tracehouse.pipeline.projection.unknowns import (
    batch_flag,
    data_parallel_gap,
    knee_note,
    node_size_note,
    refusal_notes,
)
from tracehouse.pipeline.warehouse.database import transaction
from tracehouse.pipeline.warehouse.sql_runner import raw_ddl

# The knee: the first world size whose marginal throughput per added device is below this share
# of the measured throughput per device (the ideal marginal of a perfectly scaling run).
KNEE_SHARE = 0.5
# Devices per node when neither the network file, the option nor the study's runs say (a DGX/HGX node).
DEFAULT_DEVICES_PER_NODE = 8


def identity_check(run: RunGraph, measured_windows: dict[int | None, dict[int, float]]) -> IdentityCheck:
    """Replay with every measured duration and compare each step's slowest window."""
    times = run.graph.replay(run.graph.measured_weights(run.transfer_ns))
    replayed = run.step_times(times)
    steps = {}
    for step, ranks in measured_windows.items():
        if replayed.get(step):
            steps[step] = (max(ranks.values()), max(replayed[step].values()))
    return IdentityCheck(steps)


def project_run(
    connection: duckdb.DuckDBPyConnection,
    *,
    study: str,
    run_id: str,
    world_sizes: list[int],
    scenario: Scenario,
    scenario_name: str,
    network: NetworkModel | None,
    built: tuple[RunTimeline, RunGraph] | None = None,
    assumed: str | None = None,
    interference: Interference | None = None,
    loaded: LoadedRuns | None = None,
) -> RunProjection:
    """The run's identity check and its projection at each world size (the measured one added); a
    world size the run cannot be projected to is left out, its reason kept (`refused`, `notes`).
    `built`: the run's timeline and graph when the caller has them already; `assumed`: what the
    projection had to assume of the topology (a note of every point); `interference`: the
    stretch of transfers under overlap for the run's device type (None: none modelled); `loaded`:
    what the command has read of the warehouse already."""
    timeline, run = built if built is not None else built_run(connection, study, run_id)
    facts = timeline.facts
    kind, tp, pipeline = scenario.data_parallel, scenario.tensor_parallel, pipeline_of(facts, scenario)
    given = run
    changed = (changes_kind(facts, kind) and run.kind != kind) or (changes_tp(facts, tp) and run.tp != tp)
    if changed or run.pipeline != pipeline:
        run = layout_changed(connection, timeline, kind, tp, pipeline)
    # a pipeline's graph is no replay of the measurement: the measured run's own graph is checked
    as_measured = given.pipeline is None and given.kind is None and given.tp is None
    measured = run if run.pipeline is None else given if as_measured else build_run_graph(timeline)
    identity = identity_check(measured, timeline.measured_windows())
    graphs = {run.tokens_scale: run}

    def graph_at(layout: Layout) -> RunGraph:
        """The graph a layout replays: a pipeline's is built for the tokens each pipeline carries."""
        if run.pipeline is None:
            return run
        scale = tokens_factor(layout, scenario)
        if scale not in graphs:
            graphs[scale] = layout_changed(connection, timeline, kind, tp, pipeline, scale)
        return graphs[scale]

    measured_step = median(m for m, _ in identity.steps.values()) if identity.steps else None
    gap = data_parallel_gap(facts, run, timeline)
    hosts = rank_hosts(connection, study, run_id)
    replays: list[tuple[Layout, ReplayedRun]] = []
    refused: dict[int, str] = {}
    split = (tp or facts.tp or 1) * (pipeline[0] if pipeline else facts.pp or 1)
    own = [facts.world_size] if facts.world_size % split == 0 else []  # the measured size, in the layout
    for size in sorted({*own, *world_sizes}):
        layout = layout_for(facts, size, kind, tp, pipeline)
        if gap is not None and layout.dp_new != layout.dp:
            refused[size] = gap
            continue
        try:
            at = graph_at(layout)
        except TracehouseError as exc:  # a pipeline whose micro-batches its tokens there cannot fill
            refused[size] = str(exc).partition(": ")[2]
            continue
        times = scenario_times(run_id, at, layout, scenario, network, hosts, interference)
        replays.append((layout, summarize(at, times)))
    # the node capacity places only projected layouts (the measured one sits on its traces' hosts)
    placed = assumed and any(layout.world_size_new != facts.world_size for layout, _ in replays)
    notes = [*refusal_notes(refused), *([assumed] if placed else [])]
    described = scenario.describe(network)
    if interference is not None and not scenario.ideal_network:
        described += "; " + interference.describe()
    if run.curves:  # what the split ops' times rest on (efficiency.py)
        described += "; efficiency curves (" + "; ".join(c.describe() for c in run.curves.values()) + ")"
    words = (described, "; ".join(notes) or None)
    points = _points(facts, scenario_name, words, scenario.weak_scaling, replays, measured_step)
    peak = measured_peak(connection, facts.study, facts.run_id)
    capacity, source = device_capacity(facts, scenario, network)
    points = [
        with_memory(p, facts, layout, scenario, peak, capacity)
        for (layout, _), p in zip(replays, points, strict=True)
    ]
    rests_on = provenance(run, identity, scenario, network, interference, (peak, capacity, source))
    pp = pipeline[0] if pipeline else None
    # tracehouse collect's pipelines run GPipe: a pipeline of another schedule has no measured match
    other_schedule = pipeline is not None and pipeline.schedule != DEFAULT_SCHEDULE
    measured = (loaded or LoadedRuns()).measured_runs(connection, study)
    workload = [] if other_schedule else same_workload(measured, facts, kind, tp, pp)
    points = with_measured(workload, facts, points, scenario.weak_scaling, tp, pipeline)
    points = [replace(p, provenance=rests_on) for p in points]

    def measurable(layout: Layout) -> ReplayedRun:
        at = graph_at(layout)
        return summarize(
            at, scenario_times(run_id, at, layout, scenario.measurable(), network, hosts, interference)
        )

    checks = held_out_checks(workload, facts, scenario, (replays, gap), measurable)
    changed = [f"tp={tp}"] if changes_tp(facts, tp) else []
    changed += [f"pp={pipeline.pp}"] if pipeline else []
    changed += [f"schedule={pipeline.schedule}"] if other_schedule else []
    changed[:0] = [kind] if kind is not None and (changed or changes_kind(facts, kind)) else []
    as_layout = ",".join(map(str, changed)) or None
    return RunProjection(
        facts, identity, points, notes=notes, refused=refused, checks=checks, as_kind=as_layout
    )


def layout_changed(
    connection: duckdb.DuckDBPyConnection,
    timeline: RunTimeline,
    kind: str | None,
    tp: int | None,
    pipeline: Pipeline | None = None,
    tokens_scale: float = 1.0,
) -> RunGraph:
    """The run's graph with the collectives of data-parallel `kind` planned in place of its own
    (None: its own kept), and those of a `tp`-way tensor-parallel split of a run without one
    (None: none) with its split ops' efficiency curves (synthetic.py, efficiency.py); or, with
    `pipeline` (pp, micro-batches), the run without one replayed as that pipeline (stages.py), each
    pipeline carrying `tokens_scale` times a measured data-parallel rank's tokens. A run they cannot
    be planned for is a TracehouseError saying why."""
    facts = timeline.facts
    name = f"{facts.study}/{facts.run_id}"
    kind = kind if changes_kind(facts, kind) else None
    tp = tp if changes_tp(facts, tp) else None
    if pipeline is not None:
        return pipelined(connection, timeline, kind, tp, pipeline, tokens_scale)
    what = " and ".join([*([f"as {kind}"] if kind else []), *([f"with tp={tp}"] if tp else [])])
    if kind is not None and facts.strategy is None:
        raise TracehouseError(
            f"{name}: its data-parallel kind is unknown (no manifest states its strategy), so it cannot "
            f"be projected as {kind}"
        )
    if timeline.gpu_ranks:
        change = (
            f"a change of data-parallel kind ({facts.strategy} as {kind})"
            if kind
            else f"a change of tensor parallelism (tp={tp})"
        )
        raise TracehouseError(f"{name}: {change} is planned on CPU (gloo) ranks only, not yet on GPU ranks")
    if (facts.pp or 1) > 1:
        planned = (
            f"its data-parallel collectives as {kind}" if kind else f"its tensor-parallel split ({what})"
        )
        raise TracehouseError(
            f"{name}: a pipeline-parallel run's parameters per stage are unknown, so {planned} cannot be "
            "planned"
        )
    if tp is not None and (facts.tp or 1) > 1:
        raise TracehouseError(
            f"{name}: a change of tensor-parallel degree is planned from a run without tensor parallelism; "
            f"this run measured tp={facts.tp}"
        )
    try:
        run = build_run_graph(timeline, kind, tp)
    except GraphCycleError:
        raise TracehouseError(
            f"{name}: its collectives {what}, as planned, would be awaited on some rank in another "
            "order than its measured collectives (a cycle in the replay graph), so it cannot be projected so"
        ) from None
    if kind is not None and not run.planned.any():
        needs = "n_params" if kind == "ddp" else "fsdp_units or a reference model_config"
        raise TracehouseError(
            f"{name}: no {kind} collective could be planned: its manifest needs {needs} and a known dtype, "
            "and its trace a backward (autograd::engine::evaluate_function:*)"
        )
    if tp is None:
        return run
    return replace(run, curves=study_curves(connection, facts.study, facts.device_type or "cpu"))


def pipelined(
    connection: duckdb.DuckDBPyConnection,
    timeline: RunTimeline,
    kind: str | None,
    tp: int | None,
    pipeline: Pipeline | tuple[int, int],
    tokens_scale: float = 1.0,
) -> RunGraph:
    """The run replayed as a pipeline (pp, micro-batches and schedule, GPipe where not given) over DDP
    replicas (stages.py), each carrying `tokens_scale` times a measured data-parallel rank's tokens,
    where it can be: a CPU run of the reference Llama with neither tensor nor pipeline parallelism."""
    facts = timeline.facts
    name = f"{facts.study}/{facts.run_id}"
    pipeline = Pipeline(*pipeline)
    pp = pipeline.pp
    if timeline.gpu_ranks:
        raise TracehouseError(
            f"{name}: a change of pipeline parallelism (pp={pp}) is planned on CPU (gloo) ranks only, not "
            "yet on GPU ranks"
        )
    if (facts.tp or 1) > 1 or (facts.pp or 1) > 1 or tp is not None:
        raise TracehouseError(
            f"{name}: a pipeline (pp={pp}) is planned from a run with neither tensor nor pipeline "
            f"parallelism, and not with tp added (this run: tp={facts.tp or 1}, pp={facts.pp or 1})"
        )
    if kind == "fsdp" or (kind is None and data_parallel_kind(facts.strategy) == "fsdp"):
        raise TracehouseError(
            f"{name}: a pipeline's data-parallel replicas are DDP's (tracehouse collect's pp): give "
            f"dp=N,pp={pp}, not fsdp=N"
        )
    curves = category_curves(connection, facts.study, facts.device_type or "cpu")
    try:
        return replace(build_pipeline_graph(timeline, pipeline, curves, tokens_scale), kind=kind)
    except GraphCycleError:
        raise TracehouseError(f"{name}: its pipeline of pp={pp} has a cycle (a tracehouse bug)") from None


def pipeline_of(facts: RunFacts, scenario: Scenario) -> Pipeline | None:
    """The pipeline the scenario asks of a run measured without pipeline parallelism
    (micro-batches: the scenario's, else tracehouse collect's default for the run's sequences per
    data-parallel rank; its schedule, else GPipe); None where it asks for none or the run's own."""
    pp = scenario.pipeline_parallel
    if pp is None or pp == (facts.pp or 1):
        return None
    schedule = scenario.schedule or DEFAULT_SCHEDULE
    if scenario.microbatches is not None:
        return Pipeline(pp, scenario.microbatches, schedule)
    sequences = (facts.global_batch or 0) // facts.data_parallel
    if sequences < 1:
        raise TracehouseError(
            f"{facts.study}/{facts.run_id}: its manifest gives no global_batch to choose micro-batches "
            f"from: give microbatches=M with pp={pp}"
        )
    return Pipeline(pp, default_microbatches(sequences, pp), schedule)


def held_out_checks(
    workload: list[MeasuredRun],
    facts: RunFacts,
    scenario: Scenario,
    projected: tuple[list[tuple[Layout, ReplayedRun]], str | None],
    replay: Callable[[Layout], ReplayedRun],
) -> list[Check]:
    """The run projected, without the scenario's what-ifs, to each world size at which the study
    measured another run of its workload (band.py); a replay of the scenario's own is reused
    where the scenario has no what-if."""
    replays, gap = projected
    done = {layout.world_size_new: r for layout, r in replays} if scenario == scenario.measurable() else {}
    checks = []
    tp, pipeline = scenario.tensor_parallel, pipeline_of(facts, scenario)
    for size, other in sorted(matches(workload, facts, scenario.weak_scaling, tp, pipeline).items()):
        layout = layout_for(facts, size, scenario.data_parallel, tp, pipeline)
        if size == facts.world_size and not layout.changes_layout:
            continue
        if gap is not None and layout.dp_new != layout.dp:
            continue
        replayed = done.get(size) or replay(layout)
        if replayed.step_time_us > 0:
            at = (facts.world_size, size, other.run_id)
            checks.append(Check(facts.study, facts.run_id, *at, replayed.step_time_us, other.step_time_us))
    return checks


def with_band(projection: RunProjection, band: Band) -> RunProjection:
    """The run's points with their error band (band.py) and its part of the provenance, widened
    where the projection changes the run's layout (as another data-parallel kind, tp or pp)."""
    replay_error = projection.identity.max_error
    changed = projection.as_kind is not None
    points = []
    for p in projection.points:
        factor = band.factor(p.world_size, p.measured_world_size, replay_error, changed)
        rests_on = json.dumps({**json.loads(p.provenance or "{}"), "band": band.summary()}, sort_keys=True)
        points.append(
            replace(
                p,
                step_time_low_us=p.step_time_us / factor,
                step_time_high_us=p.step_time_us * factor,
                provenance=rests_on,
            )
        )
    return replace(projection, points=points)


def provenance(
    run: RunGraph,
    identity: IdentityCheck,
    scenario: Scenario,
    network: NetworkModel | None,
    interference: Interference | None,
    memory: tuple[float | None, float | None, str | None] = (None, None, None),
) -> str:
    """What a run's projected points rest on, as JSON (`projections.provenance`): the replay's own
    error, the network model and what each of its links was fitted on, the interference and
    whether it was fitted, the collectives measured and planned, and what the memory per device
    rests on (the measured peak, the capacity and where it came from)."""
    planned = Counter(
        run.instances.op[i] for key, i in run.instances.key_index.items() if key[0] == "synthetic"
    )
    modelled = not scenario.ideal_network
    links = (
        {}
        if network is None
        else {f"{op}/{level}": link.source for (op, level), link in network.links.items()}
    )
    rests_on = {
        "replay": {
            "steps": len(identity.steps),
            "median_error": identity.median_error,
            "max_error": identity.max_error,
        },
        "network": None
        if network is None or not modelled
        else {"source": network.source, "devices_per_node": network.devices_per_node, "links": links},
        "interference": None
        if interference is None or not modelled
        else {
            "device_type": interference.device_type,
            "transfer_stretch": interference.stretch,
            "compute_stretch": interference.compute_stretch,
            "collectives": interference.instances,
            "runs": interference.runs,
            "signatures": interference.signatures,
        },
        "collectives": {
            "measured": len(run.instances.members) - sum(planned.values()),
            "planned": dict(planned),
        },
        "memory": {
            "measured_peak_bytes": memory[0],
            "activations": "measured peak less model state" if memory[0] else "not measured (a lower bound)",
            "capacity_bytes": memory[1],
            "capacity_source": memory[2],
        },
    }
    return json.dumps(rests_on, sort_keys=True)


def scenario_times(
    run_id: str,
    run: RunGraph,
    layout: Layout,
    scenario: Scenario,
    network: NetworkModel | None,
    hosts: dict,
    interference: Interference | None,
) -> np.ndarray:
    """The replayed times under the scenario (docs/projection.md, "Communication that competes").
    A transfer the network model times is its network time x (1 + stretch x overlap) x its level:
    a measured instance timed by the calibrated network keeps its own (its measured transfer over
    its network time and stretch at the measured layout), any other the link's
    (`Interference.link_scale`); a compute piece is its time alone (its measured time over its
    stretch at the measured overlap) x (1 + compute_stretch x overlap). Replayed twice: with the
    measured overlaps (none for a planned collective), then with the overlaps of the first replay."""
    weights = scaled_weights(run, layout, scenario)
    transfers = instance_transfers(run, layout, scenario, network, hosts)
    if scenario.ideal_network:
        return run.graph.replay(with_transfers(run, weights, transfers.ns, transfers.dropped))
    fit = interference or Interference("none")
    overlaps = instance_overlaps(run, run.graph.measured_times(), run.transfer_ns)
    level = np.array([fit.link_scale(run_id, source) for source in transfers.source])
    calibrated = np.array([source in LINK_SOURCES for source in transfers.source], dtype=bool)
    measured = calibrated & (run.transfer_ns[: len(level)] > 0)
    if measured.any():
        at_measured = instance_transfers(run, layout_at_measured(layout), Scenario(), network, hosts).ns
        own = measured & (at_measured > 0)
        level[own] = run.transfer_ns[own] / (at_measured[own] * (1.0 + fit.stretch * overlaps[own]))
    modelled = np.array([source is not None for source in transfers.source], dtype=bool)
    measured_compute = compute_overlaps(run, run.graph.measured_times()) if fit.compute_stretch > 0 else None
    compute = measured_compute
    times = np.empty(0)
    for _ in range(2 if fit.stretch > 0 or fit.compute_stretch > 0 else 1):
        stretched = transfers.ns * np.where(modelled, level * (1.0 + fit.stretch * overlaps), 1.0)
        scaled = weights
        if measured_compute is not None:
            stretch = fit.compute_stretch
            scaled = weights * (1.0 + stretch * compute) / (1.0 + stretch * measured_compute)
        times = run.graph.replay(with_transfers(run, scaled, stretched, transfers.dropped))
        overlaps = instance_overlaps(run, times, stretched)
        if measured_compute is not None:
            compute = compute_overlaps(run, times)
    return times


def _points(
    facts: RunFacts,
    name: str,
    words: tuple[str, str | None],
    weak_scaling: bool,
    replays: list[tuple[Layout, ReplayedRun]],
    measured_step: float | None,
) -> list[ProjectedPoint]:
    """Rows with throughput, efficiency against the measured point, marginal throughput and knee;
    `words` are the scenario's assumptions and what this run's projection leaves out."""
    tokens = facts.tokens_per_step

    def throughput(layout: Layout, step_us: float) -> float | None:
        if tokens is None or step_us <= 0:
            return None
        per_step = tokens * (layout.dp_new / layout.dp if weak_scaling else 1.0)
        return per_step / (step_us / 1e6)

    base_tps = None
    if measured_step and tokens:
        base_tps = tokens / (measured_step / 1e6)
    base_per_device = base_tps / facts.world_size if base_tps else None
    rows: list[dict[str, Any]] = []
    previous: tuple[int, float] | None = (facts.world_size, base_tps) if base_tps else None
    knee_found = False
    for layout, replayed in replays:
        size = layout.world_size_new
        own = size == facts.world_size and not layout.changes_layout  # as measured
        row: dict[str, Any] = dict(
            study=facts.study,
            run_id=facts.run_id,
            scenario=name,
            assumptions=words[0],
            notes=words[1],
            world_size=size,
            layout=layout_text(
                layout.kind,
                layout.dp_new,
                layout.tp_target,
                layout.pp_target,
                layout.microbatches,
                layout.schedule,
            ),
            measured_world_size=facts.world_size,
            measured_step_time_us=measured_step if own else None,
            measured_run_id=facts.run_id if own and measured_step else None,
            measured_tokens_per_s_per_device=base_per_device if own else None,
            flag=batch_flag(facts, layout, weak_scaling),
        )
        tps = throughput(layout, replayed.step_time_us)
        efficiency = (tps / base_tps) / (size / facts.world_size) if tps and base_tps else None
        marginal = None
        if tps is not None and previous is not None and size > previous[0]:
            marginal = (tps - previous[1]) / (size - previous[0])
        knee = bool(
            not knee_found
            and marginal is not None
            and base_per_device
            and marginal < KNEE_SHARE * base_per_device
        )
        knee_found = knee_found or knee
        if tps is not None and size >= facts.world_size:
            previous = (size, tps)
        by_dim = replayed.exposed_by_dim_frac
        rows.append(
            {
                **row,
                "step_time_us": replayed.step_time_us,
                "tokens_per_s": tps,
                "tokens_per_s_per_device": tps / size if tps is not None else None,
                "scaling_efficiency": efficiency,
                "marginal_tokens_per_s_per_device": marginal,
                "knee": knee,
                "compute_frac": replayed.compute_frac,
                "exposed_comm_frac": replayed.exposed_comm_frac,
                "other_frac": replayed.other_frac,
                "idle_frac": replayed.idle_frac,
                **{f"exposed_comm_{dim}_frac": by_dim.get(dim, 0.0) for dim in DIMENSIONS},
            }
        )
    note = knee_note(facts, rows, base_per_device)
    return [ProjectedPoint(**row, knee_note=note) for row in rows]


class MeasuredRun(NamedTuple):
    """A measured run of a workload (`same_workload`)."""

    run_id: str
    world_size: int
    tokens_per_step: int
    step_time_us: float
    tokens_per_s_per_device: float | None


def same_workload(
    measured: list[tuple],
    facts: RunFacts,
    kind: str | None = None,
    tp: int | None = None,
    pp: int | None = None,
) -> list[MeasuredRun]:
    """The study's other measured runs of the run's workload (same strategy, tp and pp; with
    data-parallel `kind`, tensor- and pipeline-parallel degrees `tp`, `pp` where given,
    `layouts.strategy_as`), of `measured` (LoadedRuns.measured_runs: the study's runs)."""
    added_pp = pp if pp is not None and pp != (facts.pp or 1) else None
    strategy = strategy_as(facts.strategy, kind, tp if changes_tp(facts, tp) else None, added_pp)
    if strategy is None or facts.tokens_per_step is None:
        return []
    want = (strategy, tp or facts.tp or 1, pp or facts.pp or 1)
    return [
        MeasuredRun(*row)
        for *row, run_strategy, run_tp, run_pp in measured
        if row[0] != facts.run_id and (run_strategy, run_tp, run_pp) == want
    ]


def match_at(
    workload: list[MeasuredRun],
    facts: RunFacts,
    world_size: int,
    weak_scaling: bool,
    tp: int | None = None,
    pipeline: Pipeline | None = None,
) -> MeasuredRun | None:
    """The measured run of `same_workload` at a world size with the tokens per step the projection
    assumes there (the run's own under strong scaling, grown with the data-parallel degree under
    weak scaling; tp, pipeline: the projected tensor-parallel degree and pipeline); the first by
    run id, or None."""
    layout = layout_for(facts, world_size, tp=tp, pipeline=pipeline)
    grow = layout.dp_new / layout.dp if weak_scaling else 1.0
    tokens = round((facts.tokens_per_step or 0) * grow)
    return next((r for r in workload if r.world_size == world_size and r.tokens_per_step == tokens), None)


def matches(
    workload: list[MeasuredRun],
    facts: RunFacts,
    weak_scaling: bool,
    tp: int | None = None,
    pipeline: Pipeline | None = None,
) -> dict[int, MeasuredRun]:
    """Every world size `match_at` finds a measured run at, with that run."""
    split = (tp or facts.tp or 1) * (pipeline[0] if pipeline else facts.pp or 1)
    sizes = {r.world_size for r in workload if r.world_size % split == 0}
    found = (match_at(workload, facts, size, weak_scaling, tp, pipeline) for size in sizes)
    return {r.world_size: r for r in found if r is not None}


def with_measured(
    workload: list[MeasuredRun],
    facts: RunFacts,
    points: list[ProjectedPoint],
    weak_scaling: bool,
    tp: int | None = None,
    pipeline: Pipeline | None = None,
) -> list[ProjectedPoint]:
    """Each point beside the study's measured run of the same workload at its world size (`match_at`)."""
    out = []
    for p in points:
        match = match_at(workload, facts, p.world_size, weak_scaling, tp, pipeline) if workload else None
        if p.measured_run_id is None and match is not None:
            p = replace(
                p,
                measured_run_id=match.run_id,
                measured_step_time_us=match.step_time_us,
                measured_tokens_per_s_per_device=match.tokens_per_s_per_device,
            )
        out.append(p)
    return out


def projections_ddl() -> str:
    """The `projections` table's definition (sql/raw/projections.sql)."""
    return raw_ddl("projections")


def store_projections(connection: duckdb.DuckDBPyConnection, projections: list[RunProjection]) -> int:
    """Replace the rows of each (run, scenario) projected; returns the number of rows written."""
    connection.execute(projections_ddl())
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = [p for projection in projections for p in projection.points]
    columns = [*ProjectedPoint.__dataclass_fields__, "created_at"]
    if not rows:  # every run of the study failed: nothing replaces what is stored
        return 0
    with transaction(connection):
        for key in {(p.study, p.run_id, p.scenario) for p in rows}:
            connection.execute(
                "DELETE FROM projections WHERE study = ? AND run_id = ? AND scenario = ?", list(key)
            )
        placeholders = ", ".join("?" for _ in columns)
        connection.executemany(
            f"INSERT INTO projections ({', '.join(columns)}) VALUES ({placeholders})",
            [[*asdict(p).values(), now] for p in rows],
        )
    return len(rows)


def project_study(
    warehouse_dir: Path,
    *,
    study: str,
    run_id: str | None,
    world_sizes: list[int],
    scenario: Scenario,
    scenario_name: str,
    network_file: Path | None = None,
    devices_per_node: int | None = None,
    progress: Callable[[str], None] | None = None,
    model_parallel: tuple[int, int] | None = None,
    changes_only: bool = False,
    loaded: LoadedRuns | None = None,
) -> Projections:
    """Project one run, or every run of the study, and store the points in `projections`, and
    each run's critical paths of its measured replay (critical_path_segments, op_slack_rows). One
    run that cannot be projected is a TracehouseError; across a study, each such run is left out
    and listed in the result's `failed` with its reason, and the others are projected.
    `model_parallel`: the (tp, pp) a layout asks for; a run measured with another pp, or another tp
    than a run measured with tensor parallelism, is not projected (`same_split`). `changes_only`:
    project only the runs whose layout the scenario changes (`changes_layout`; the others are left
    out, not failed). `loaded`: the runs the command has read already (`with_other_kinds` shares
    them between its layouts)."""
    from tracehouse.pipeline.warehouse.database import connect
    from tracehouse.pipeline.warehouse.reading import open_reader

    network_from_file = load_network_file(network_file) if network_file is not None else None
    results = Projections()
    paths = StudyPaths()
    loaded = loaded if loaded is not None else LoadedRuns()
    with open_reader(warehouse_dir) as connection:
        stored_checks = read_checks(connection, study)
        results.power_w = measured_power(connection, study)
        every_run = study_runs(connection, study)
        runs = [run_id] if run_id is not None else every_run
        per_node, assumed = (devices_per_node, None) if devices_per_node else node_size(connection, study)
        if network_from_file is not None:
            assumed = None  # the file states devices_per_node
        fits = stored_fits(connection, study) if scenario.interference else {}
        fitting = fits is None
        if fits is None:
            fits = fit_study(connection, study, per_node, progress)
        for run in runs:
            if changes_only and not changes_layout(run_facts(connection, study, run), scenario):
                continue  # the caller projects it as measured
            if progress is not None:
                progress(f"replaying {study}/{run} at {len(world_sizes)} world size(s)")
            try:
                if changes_only:  # the measured run's paths were stored as it was projected
                    timeline = loaded.load(connection, study, run)
                    changed = (scenario.data_parallel, scenario.tensor_parallel)
                    graph = layout_changed(
                        connection, timeline, *changed, pipeline_of(timeline.facts, scenario)
                    )
                else:
                    timeline, graph = paths.replay(connection, study, run, loaded)
                same_split(timeline.facts, model_parallel)
                network = network_from_file or calibrated_network(
                    connection, study=study, run_id=run, devices_per_node=per_node
                )
                results.append(
                    project_run(
                        connection,
                        study=study,
                        run_id=run,
                        world_sizes=world_sizes,
                        scenario=scenario,
                        scenario_name=scenario_name,
                        network=network,
                        built=(timeline, graph),
                        assumed=assumed,
                        interference=interference_of(fits, device_type(timeline), scenario),
                        loaded=loaded,
                    )
                )
            except TracehouseError as exc:
                if run_id is not None:
                    raise
                results.failed[run] = str(exc).splitlines()[0]
        results.interference = list(fits.values())
    # The checks of the runs as measured are stored, each run's replacing its earlier ones, and set the
    # rate; those of runs as the other kind are not stored (they would replace the run's own) and set
    # the band's layout error.
    projected = {r.facts.run_id for r in results if r.as_kind is None}
    checks = [c for r in results if r.as_kind is None for c in r.checks]
    results.band = study_band([*(c for c in stored_checks if c.run_id not in projected), *checks])
    if any(r.as_kind is not None for r in results):
        swapped = [c for r in results if r.as_kind is not None for c in r.checks]
        results.band = with_layout_error(results.band, swapped)
    results[:] = [with_band(r, results.band) for r in results]
    with connect(warehouse_dir) as connection:
        with transaction(connection):
            store_checks(connection, study, projected, checks)
        store_projections(connection, results)
        store_paths(connection, study, paths)
        if fitting:
            with transaction(connection):
                store_fits(connection, study, fits)
    return results


def with_other_kinds(
    results: Projections,
    warehouse_dir: Path,
    *,
    scenario: Scenario,
    scenario_name: str | None,
    **options: Any,
) -> Projections:
    """`results` (a study projected as measured) and every run of the study projected as the other
    data-parallel kind (DDP runs as FSDP, FSDP runs as DDP) and, where it has neither tensor nor
    pipeline parallelism, split over each degree of TP_DEGREES that its study's models allow, as
    each kind, and as a pipeline of each degree of PP_DEGREES its model's layers allow (over DDP
    replicas) in each schedule of SCHEDULES, as `project_study` with `options` projected them: what
    `--search` ranks. Each layout's points are stored under the scenario's name with `+as-<kind>`
    (and `+tp<N>`, or `+pp<N>` and `+1f1b` for that schedule; the scenario's own short name when
    none is given); a run that cannot be projected so is in `failed`, as "<run> as <kind>" (or
    "<run> as <kind>,tp=<N>", "<run> as ddp,pp=<N>", "<run> as ddp,pp=<N>,schedule=1f1b")."""
    from tracehouse.pipeline.warehouse.reading import open_reader

    out = Projections(results, failed=results.failed)
    options.setdefault("loaded", LoadedRuns())
    with open_reader(warehouse_dir) as connection:
        tp_split, pp_split = split_degrees(connection, options["study"])
    layouts = [(kind, tp, None, None) for tp in (None, *tp_split) for kind in ("ddp", "fsdp")]
    layouts += [("ddp", None, pp, schedule) for pp in pp_split for schedule in SCHEDULES]
    for kind, tp, pp, schedule in layouts:
        other = schedule if schedule != DEFAULT_SCHEDULE else None
        changed = replace(
            scenario, data_parallel=kind, tensor_parallel=tp, pipeline_parallel=pp, schedule=other
        )
        own = changed.short_name(options.get("network_file"))
        split = f"+tp{tp}" if tp else f"+pp{pp}" + (f"+{other}" if other else "") if pp else ""
        name = f"{scenario_name}+as-{kind}{split}" if scenario_name else own
        found = project_study(
            warehouse_dir, run_id=None, scenario=changed, scenario_name=name, changes_only=True, **options
        )
        out.extend(found)
        label = f"{kind},tp={tp}" if tp else f"{kind},pp={pp}" if pp else kind
        label += f",schedule={other}" if other else ""
        out.failed.update({f"{run} as {label}": why for run, why in found.failed.items()})
        out.power_w.update(found.power_w)
    out.power_w.update(results.power_w)
    out.interference, out.band = results.interference, results.band
    return out


# The tensor- and pipeline-parallel degrees `with_other_kinds` tries (tp within a node of 8 devices).
TP_DEGREES = (2, 4, 8)
PP_DEGREES = (2, 4, 8)


def split_degrees(connection: duckdb.DuckDBPyConnection, study: str) -> tuple[list[int], list[int]]:
    """The degrees of TP_DEGREES that split the reference model of some run of the study with
    neither tensor nor pipeline parallelism (its heads, key-value heads, feed-forward width and
    vocabulary), and those of PP_DEGREES that its layers allow."""
    rows = connection.execute(
        """SELECT m.model_config FROM runs AS r JOIN run_manifests AS m USING (study, run_id)
           WHERE r.study = ? AND coalesce(r.tp, 1) = 1 AND coalesce(r.pp, 1) = 1""",
        [study],
    ).fetchall()
    models = [m for (text,) in rows if (m := reference_model(text)) is not None]
    sizes = [(m.n_heads, m.n_kv_heads, m.ffn_hidden, m.vocab_size) for m in models]
    tp = [tp for tp in TP_DEGREES if any(all(n % tp == 0 for n in size) for size in sizes)]
    return tp, [pp for pp in PP_DEGREES if any(pp <= m.n_layers for m in models)]


def changes_layout(facts: RunFacts, scenario: Scenario) -> bool:
    """Whether the scenario's layout is another than the run's that it can take: tp or pp added to a
    run with neither tensor nor pipeline parallelism where it sets one, else the other
    data-parallel kind."""
    plain = (facts.tp or 1) == 1 and (facts.pp or 1) == 1
    if scenario.pipeline_parallel is not None:
        return plain and scenario.pipeline_parallel > 1
    if scenario.tensor_parallel is not None:
        return plain and changes_tp(facts, scenario.tensor_parallel)
    return changes_kind(facts, scenario.data_parallel)


def changes_kind(facts: RunFacts, kind: str | None) -> bool:
    """Whether projecting the run with data-parallel `kind` changes its kind."""
    return kind is not None and kind != data_parallel_kind(facts.strategy)


def changes_tp(facts: RunFacts, tp: int | None) -> bool:
    """Whether projecting the run with tensor-parallel degree `tp` changes it."""
    return tp is not None and tp != (facts.tp or 1)


def same_split(facts: RunFacts, model_parallel: tuple[int, int] | None) -> None:
    """A TracehouseError where a layout asks for another pp than a run measured with pipeline
    parallelism, or another tp than a run measured with tensor parallelism (from a run without,
    `layout_changed` plans them)."""
    if model_parallel is None:
        return
    tp, pp = model_parallel
    if (facts.pp or 1) > 1 and pp != facts.pp:
        raise TracehouseError(
            f"the layout's pp={pp} differs from the run's pp={facts.pp}: a change of pipeline parallelism "
            "is projected from a run without it, not yet from one with another degree"
        )
    if (facts.tp or 1) > 1 and tp != facts.tp:
        raise TracehouseError(
            f"the layout's tp={tp} differs from the run's tp={facts.tp}: a change of tensor parallelism is "
            "projected from a run without it, not yet from one with another degree"
        )


def interference_of(fits: dict[str, Interference], device: str, scenario: Scenario) -> Interference | None:
    """The device type's fit, else its default (`unfitted`); None when the scenario leaves it out."""
    if not scenario.interference:
        return None
    return fits.get(device) or unfitted(device)


def fit_study(
    connection: duckdb.DuckDBPyConnection,
    study: str,
    devices_per_node: int,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Interference]:
    """The interference fit of every device type of the study, from every run it can read
    (projection/interference.py); `tracehouse project` stores it (store_fits) for the next one."""
    samples: dict[str, FitSamples] = {}
    for run in study_runs(connection, study):
        if progress is not None:
            progress(f"reading {study}/{run} to fit how communication and compute interfere")
        try:
            built = built_run(connection, study, run)
        except TracehouseError:
            continue  # the projection of the run says why
        add_samples(
            samples.setdefault(device_type(built[0]), FitSamples()),
            connection,
            study,
            run,
            built,
            devices_per_node,
        )
    return {device: rows.fit(device) for device, rows in samples.items()}


def node_size(connection: duckdb.DuckDBPyConnection, study: str) -> tuple[int, str | None]:
    """Devices per node of a calibrated network (a node's capacity, where projected ranks are
    placed) and, when it had to be assumed, the note saying so: the largest node_devices the
    study's runs recorded (never below the devices a node ran ranks on), else the most devices a
    run used on one node (manifests written before node_devices), else DEFAULT_DEVICES_PER_NODE."""
    capacity, used = connection.execute(
        """SELECT max(CASE WHEN node_devices IS NOT NULL
                               THEN greatest(node_devices, coalesce(devices_per_node, 1)) END),
                  max(devices_per_node)
           FROM runs WHERE study = ?""",
        [study],
    ).fetchall()[0]
    if capacity:
        return int(capacity), None
    if used:
        return int(used), node_size_note(int(used), from_used=True)
    return DEFAULT_DEVICES_PER_NODE, node_size_note(DEFAULT_DEVICES_PER_NODE, from_used=False)


def study_runs(connection: duckdb.DuckDBPyConnection, study: str) -> list[str]:
    """The runs of a study that have step windows; none is a WarehouseError naming the study."""
    runs = [
        r
        for (r,) in connection.execute(
            "SELECT DISTINCT run_id FROM step_breakdown WHERE study = ? ORDER BY run_id", [study]
        ).fetchall()
    ]
    if not runs:
        known = [s for (s,) in connection.execute("SELECT DISTINCT study FROM runs ORDER BY 1").fetchall()]
        raise WarehouseError(f"no run with steps in study {study!r} (studies: {', '.join(known) or 'none'})")
    return runs
