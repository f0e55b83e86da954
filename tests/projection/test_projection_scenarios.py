"""Scenario properties on real runs (Hypothesis over the scenario): faster never slower, an ideal
network no faster than the ranks' own critical paths, exposed communication's share growing with
the data-parallel world size on a fixed network, and the projection at the measured size."""

from __future__ import annotations

import itertools
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tracehouse.pipeline.projection.breakdown import summarize
from tracehouse.pipeline.projection.build import RunGraph, build_run_graph
from tracehouse.pipeline.projection.graph import Cost
from tracehouse.pipeline.projection.network import Link, NetworkModel, calibrated_network
from tracehouse.pipeline.projection.scenario import Scenario, edge_weights, layout_for
from tracehouse.pipeline.projection.timeline import RunTimeline, load_run
from tracehouse.pipeline.warehouse.reading import open_reader

RUNS = ["ddp-ws2", "fsdp-ws2", "tp-ws2", "pp-ws2", "fsdp_tp-ws4-tp2"]
SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@cache
def _run(warehouse: Path, run_id: str) -> tuple[RunTimeline, RunGraph]:
    with open_reader(warehouse) as con:
        timeline = load_run(con, "tiny-cpu-gloo", run_id)
    return timeline, build_run_graph(timeline)


def _network(busbw: float, latency: float) -> NetworkModel:
    return NetworkModel(
        devices_per_node=8,
        links={("*", "intra_node"): Link(busbw, latency), ("*", "inter_node"): Link(busbw / 4, latency * 4)},
    )


def _step(run: RunGraph, weights: np.ndarray) -> float:
    return summarize(run, run.graph.replay(weights)).step_time_us


speedups = st.floats(1.0, 8.0)


@SETTINGS
@given(
    run_id=st.sampled_from(RUNS),
    a=speedups,
    b=speedups,
    m=speedups,
    bw=st.floats(0.05, 50.0),
    factor=st.floats(1.0, 10.0),
)
def test_faster_compute_or_more_bandwidth_never_makes_a_step_slower(
    sample_warehouse, run_id, a, b, m, bw, factor
) -> None:
    timeline, run = _run(sample_warehouse, run_id)
    layout = layout_for(timeline.facts, timeline.facts.world_size * 4)
    slow, fast = sorted((a, b))
    net = _network(bw, 100.0)
    base = _step(run, edge_weights(run, layout, Scenario(compute_speedup=slow), net))
    assert _step(run, edge_weights(run, layout, Scenario(compute_speedup=fast), net)) <= base + 1e-6
    assert (
        _step(run, edge_weights(run, layout, Scenario(compute_speedup=slow, matmul_speedup=m), net))
        <= base + 1e-6
    )
    assert (
        _step(run, edge_weights(run, layout, Scenario(compute_speedup=slow), _network(bw * factor, 100.0)))
        <= base + 1e-6
    )
    assert (
        _step(run, edge_weights(run, layout, Scenario(compute_speedup=slow), _network(bw, 100.0 / factor)))
        <= base + 1e-6
    )


@SETTINGS
@given(run_id=st.sampled_from(RUNS), grow=st.sampled_from([1, 2, 8, 64]), c=speedups)
def test_an_ideal_network_is_no_faster_than_the_ranks_own_critical_paths(
    sample_warehouse, run_id, grow, c
) -> None:
    timeline, run = _run(sample_warehouse, run_id)
    layout = layout_for(timeline.facts, timeline.facts.world_size * grow)
    ideal = edge_weights(run, layout, Scenario(compute_speedup=c, ideal_network=True), None)
    own = ideal.copy()
    own[run.graph.cost == Cost.TRANSFER] = -1e30  # no rank waits for another: its own critical path
    assert _step(run, ideal) >= _step(run, own) - 1e-6


@SETTINGS
@given(
    run_id=st.sampled_from(["ddp-ws2", "fsdp-ws2"]), bw=st.floats(0.05, 50.0), latency=st.floats(0.0, 500.0)
)
def test_exposed_communication_share_never_falls_as_data_parallelism_grows(
    sample_warehouse, run_id, bw, latency
) -> None:
    timeline, run = _run(sample_warehouse, run_id)
    net = _network(bw, latency)
    shares = []
    for size in (2, 4, 8, 16, 64, 256, 2048):
        weights = edge_weights(run, layout_for(timeline.facts, size), Scenario(), net)
        shares.append(summarize(run, run.graph.replay(weights)).exposed_comm_frac)
    assert all(later >= earlier - 1e-9 for earlier, later in itertools.pairwise(shares)), shares


def test_without_a_network_model_the_measured_size_replays_the_measurement(sample_warehouse) -> None:
    for run_id in RUNS:
        timeline, run = _run(sample_warehouse, run_id)
        weights = edge_weights(run, layout_for(timeline.facts, timeline.facts.world_size), Scenario(), None)
        np.testing.assert_allclose(weights, run.graph.measured_weights(run.transfer_ns))


@pytest.mark.parametrize("run_id", [*RUNS, "ddp-ws4", "fsdp-ws4"])
def test_at_the_measured_size_the_run_calibrated_on_itself_projects_within_5_percent(
    sample_warehouse, run_id
) -> None:
    timeline, run = _run(sample_warehouse, run_id)
    with open_reader(sample_warehouse) as con:
        net = calibrated_network(con, study="tiny-cpu-gloo", run_id=run_id, devices_per_node=8)
        measured = con.execute(
            "SELECT step_time_us FROM scale_points WHERE study = 'tiny-cpu-gloo' AND run_id = ?", [run_id]
        ).fetchall()[0][0]
    weights = edge_weights(run, layout_for(timeline.facts, timeline.facts.world_size), Scenario(), net)
    projected = _step(run, weights)
    assert abs(projected - measured) / measured <= 0.05, (projected, measured)


def test_a_world_size_that_does_not_keep_the_model_parallel_degree_is_refused(sample_warehouse) -> None:
    from tracehouse.pipeline.common.errors import TracehouseError

    timeline, _ = _run(sample_warehouse, "fsdp_tp-ws4-tp2")
    with pytest.raises(TracehouseError, match="not a multiple of the run's tp x pp = 2"):
        layout_for(timeline.facts, 7)
