"""Project a measured run to other world sizes under a scenario, and check the replay itself.

`project_run` replays the run once with its measured durations (the identity check: the replayed
step times against the measured ones), then once per world size with the scenario's weights; each
point is summarized by the METHODOLOGY breakdown of the replayed steps. `store_projections`
writes the rows into the warehouse's `projections` table, replacing earlier rows of the same
run and scenario in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from statistics import median
from typing import Any

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.pipeline.projection.breakdown import DIMENSIONS, ReplayedRun, summarize
from tracehouse.pipeline.projection.build import RunGraph, build_run_graph
from tracehouse.pipeline.projection.network import NetworkModel, calibrated_network, load_network_file
from tracehouse.pipeline.projection.scenario import Layout, Scenario, edge_weights, layout_for
from tracehouse.pipeline.projection.timeline import RunFacts, RunTimeline, load_run
from tracehouse.pipeline.warehouse import transaction

# The knee: the first world size whose marginal throughput per added device is below this share
# of the measured throughput per device (the ideal marginal of a perfectly scaling run).
KNEE_SHARE = 0.5
# Devices per node when neither the network file, the option nor the study's runs say (a DGX/HGX node).
DEFAULT_DEVICES_PER_NODE = 8


@dataclass(frozen=True)
class IdentityCheck:
    """The replay with the measured durations against the measured step times (slowest rank)."""

    steps: dict[int | None, tuple[float, float]]  # step -> (measured µs, replayed µs)

    @property
    def errors(self) -> list[float]:
        return [abs(r - m) / m for m, r in self.steps.values() if m > 0]

    @property
    def median_error(self) -> float:
        return median(self.errors) if self.errors else 0.0

    @property
    def max_error(self) -> float:
        return max(self.errors, default=0.0)


@dataclass(frozen=True, kw_only=True)
class ProjectedPoint:
    """One row of `projections`."""

    study: str
    run_id: str
    scenario: str
    assumptions: str
    notes: str | None
    world_size: int
    measured_world_size: int
    step_time_us: float
    measured_step_time_us: float | None
    tokens_per_s: float | None
    tokens_per_s_per_device: float | None
    scaling_efficiency: float | None
    marginal_tokens_per_s_per_device: float | None
    knee: bool
    compute_frac: float
    exposed_comm_frac: float
    other_frac: float
    idle_frac: float
    exposed_comm_dp_frac: float
    exposed_comm_tp_frac: float
    exposed_comm_pp_frac: float
    exposed_comm_other_frac: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunProjection:
    """A run's identity check and its projected points, in world-size order."""

    facts: RunFacts
    identity: IdentityCheck
    points: list[ProjectedPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the projection leaves out, in words

    @property
    def knee(self) -> int | None:
        return next((p.world_size for p in self.points if p.knee), None)


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
) -> RunProjection:
    """The run's identity check and its projection at each world size (the measured one added)."""
    timeline = load_run(connection, study, run_id)
    run = build_run_graph(timeline)
    identity = identity_check(run, timeline.measured_windows())
    facts = timeline.facts
    measured_step = median(m for m, _ in identity.steps.values()) if identity.steps else None
    sizes = sorted({facts.world_size, *world_sizes})
    replays = []
    for size in sizes:
        layout = layout_for(facts, size)
        times = run.graph.replay(edge_weights(run, layout, scenario, network))
        replays.append((layout, summarize(run, times)))
    notes = _notes(facts, run, timeline)
    words = (scenario.describe(network), "; ".join(notes) or None)
    points = _points(facts, scenario_name, words, scenario.weak_scaling, replays, measured_step)
    return RunProjection(facts, identity, points, notes=notes)


def _notes(facts: RunFacts, run: RunGraph, timeline: RunTimeline) -> list[str]:
    """What the projection of this run cannot include."""
    strategy = facts.strategy or ""
    if strategy not in ("ddp", "fsdp", "fsdp_tp") or run.instances.members:
        return []
    if timeline.gpu_ranks:
        why = "planning them from a GPU trace is not supported yet"
    elif strategy.startswith("fsdp") and not facts.fsdp_units:
        why = "its manifest records no fsdp_units (collected before tracehouse recorded them)"
    else:
        why = "the trace shows no backward or FSDP hooks to place them at"
    return [
        f"{strategy} measured on one data-parallel rank issues no data-parallel collective and {why}: "
        "the projection leaves them out (optimistic)"
    ]


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
    rows: list[ProjectedPoint] = []
    previous: tuple[int, float] | None = (facts.world_size, base_tps) if base_tps else None
    knee_found = False
    for layout, replayed in replays:
        size = layout.world_size_new
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
            ProjectedPoint(
                study=facts.study,
                run_id=facts.run_id,
                scenario=name,
                assumptions=words[0],
                notes=words[1],
                world_size=size,
                measured_world_size=facts.world_size,
                step_time_us=replayed.step_time_us,
                measured_step_time_us=measured_step if size == facts.world_size else None,
                tokens_per_s=tps,
                tokens_per_s_per_device=tps / size if tps is not None else None,
                scaling_efficiency=efficiency,
                marginal_tokens_per_s_per_device=marginal,
                knee=knee,
                compute_frac=replayed.compute_frac,
                exposed_comm_frac=replayed.exposed_comm_frac,
                other_frac=replayed.other_frac,
                idle_frac=replayed.idle_frac,
                **{f"exposed_comm_{dim}_frac": by_dim.get(dim, 0.0) for dim in DIMENSIONS},
            )
        )
    return rows


def projections_ddl() -> str:
    """The `projections` table's definition (sql/raw/projections.sql)."""
    return resources.files("tracehouse.sql").joinpath("raw/projections.sql").read_text(encoding="utf-8")


def store_projections(connection: duckdb.DuckDBPyConnection, projections: list[RunProjection]) -> int:
    """Replace the rows of each (run, scenario) projected; returns the number of rows written."""
    connection.execute(projections_ddl())
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = [p for projection in projections for p in projection.points]
    columns = [*ProjectedPoint.__dataclass_fields__, "created_at"]
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
) -> list[RunProjection]:
    """Project one run, or every run of the study, and store the points in `projections`."""
    from tracehouse.pipeline.reading import open_reader
    from tracehouse.pipeline.warehouse import connect

    network_from_file = load_network_file(network_file) if network_file is not None else None
    results = []
    with open_reader(warehouse_dir) as connection:
        runs = [run_id] if run_id is not None else study_runs(connection, study)
        per_node = devices_per_node or node_size(connection, study)
        for run in runs:
            network = network_from_file or calibrated_network(
                connection, study=study, run_id=run, devices_per_node=per_node
            )
            if progress is not None:
                progress(f"replaying {study}/{run} at {len(world_sizes)} world size(s)")
            results.append(
                project_run(
                    connection,
                    study=study,
                    run_id=run,
                    world_sizes=world_sizes,
                    scenario=scenario,
                    scenario_name=scenario_name,
                    network=network,
                )
            )
    with connect(warehouse_dir) as connection:
        store_projections(connection, results)
    return results


def node_size(connection: duckdb.DuckDBPyConnection, study: str) -> int:
    """Devices per node of a calibrated network: the largest the study's runs used (a run on one
    device says 1 of a node that may hold more), else DEFAULT_DEVICES_PER_NODE."""
    (largest,) = connection.execute(
        "SELECT max(devices_per_node) FROM runs WHERE study = ?", [study]
    ).fetchall()[0]
    return int(largest) if largest else DEFAULT_DEVICES_PER_NODE


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
