"""The replay of measured runs (docs/projection.md): identity on every multi-step trace, placement
from dependencies only, and the critical-path sensitivity rules against an independent oracle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tracehouse.pipeline.projection.build import RunGraph, build_run_graph
from tracehouse.pipeline.projection.graph import Cost
from tracehouse.pipeline.projection.project import identity_check
from tracehouse.pipeline.projection.timeline import load_run
from tracehouse.pipeline.warehouse.reading import open_reader

MEDIAN_ERROR = 0.02
MAX_ERROR = 0.05


def _multi_step_runs(warehouse: Path) -> list[tuple[str, str]]:
    with open_reader(warehouse) as con:
        return con.execute(
            """SELECT study, run_id FROM step_breakdown WHERE step IS NOT NULL
               GROUP BY study, run_id HAVING count(DISTINCT step) >= 2 ORDER BY 1, 2"""
        ).fetchall()


def _graph(warehouse: Path, study: str, run_id: str):
    with open_reader(warehouse) as con:
        timeline = load_run(con, study, run_id)
    return timeline, build_run_graph(timeline)


def _check_identity(warehouse: Path, study: str, run_id: str) -> None:
    timeline, run = _graph(warehouse, study, run_id)
    check = identity_check(run, timeline.measured_windows())
    assert len(check.steps) == timeline.windows["step"].n_unique(), "every measured step is replayed"
    assert check.median_error <= MEDIAN_ERROR, (run_id, check.steps)
    assert check.max_error <= MAX_ERROR, (run_id, check.steps)


def test_identity_replay_on_every_multi_step_shared_trace(shared_traces_warehouse: Path) -> None:
    runs = _multi_step_runs(shared_traces_warehouse)
    assert len(runs) >= 7, runs  # resnet50 x3, mi300_ddp, nccl_parser_config, rank-0.Apr_03, pair_sampled
    for study, run_id in runs:
        _check_identity(shared_traces_warehouse, study, run_id)


def test_identity_replay_on_every_sample_run(sample_warehouse: Path) -> None:
    runs = _multi_step_runs(sample_warehouse)
    assert len(runs) == 9
    for study, run_id in runs:
        _check_identity(sample_warehouse, study, run_id)


def _anchors(run: RunGraph) -> np.ndarray:
    g = run.graph
    has_in = np.zeros(g.n_nodes, dtype=bool)
    has_in[g.dst] = True
    return ~has_in


@pytest.mark.parametrize("run_id", ["ddp-ws2", "pp-ws2", "fsdp_tp-ws4-tp2"])
def test_the_replay_places_events_from_dependencies_not_their_timestamps(
    sample_warehouse: Path, run_id
) -> None:
    # Scramble every measured time but the anchors' (each rank's first host instant and work
    # launched before the trace): a replay that read them back would change.
    _, run = _graph(sample_warehouse, "tiny-cpu-gloo", run_id)
    g = run.graph
    weights = g.measured_weights(run.transfer_ns)
    before = g.replay(weights)
    anchors = _anchors(run)
    assert anchors.sum() <= 8 * 4, "only first instants are anchored"
    scrambled = g.measured.copy()
    rng = np.random.default_rng(0)
    scrambled[~anchors] = g.origin + rng.integers(0, 10**12, size=int((~anchors).sum()))
    object.__setattr__(g, "measured", scrambled)
    try:
        after = g.replay(weights)
    finally:
        object.__setattr__(g, "measured", run.graph.measured)
    np.testing.assert_array_equal(before, after)


def _longest_to(run: RunGraph, weights: np.ndarray, targets: list[int]) -> np.ndarray:
    """Oracle: the longest path from each node to any target (−inf when none), by a reverse
    relaxation over the edges sorted by the forward times (written here, not the engine's)."""
    g = run.graph
    tail = np.full(g.n_nodes, -np.inf)
    tail[targets] = 0.0
    for _ in range(g.n_nodes):
        changed = False
        candidate = tail[g.dst] + weights
        better = candidate > tail[g.src]
        if better.any():
            np.maximum.at(tail, g.src[better], candidate[better])
            changed = True
        if not changed:
            break
    return tail


@pytest.mark.parametrize(("study", "run_id"), [("tiny-cpu-gloo", "ddp-ws2"), ("tiny-cpu-gloo", "tp-ws2")])
def test_lengthening_an_event_lengthens_the_step_by_what_its_slack_does_not_absorb(
    sample_warehouse: Path, study: str, run_id: str
) -> None:
    _, run = _graph(sample_warehouse, study, run_id)
    g = run.graph
    weights = g.measured_weights(run.transfer_ns)
    times = g.replay(weights)
    window = next(w for w in run.windows if w.rank == 0)
    step = window.steps[-2]  # a window closed by the next step's opening instant
    end_node = window.ends[-2] if window.ends[-2] is not None else None
    targets = [end_node] if end_node is not None else window.starts[-1]
    tail = _longest_to(run, weights, targets)
    start, end = run.window_bounds(times, 0, step)
    scalable = np.flatnonzero(np.isin(g.cost, (Cost.COMPUTE_OTHER, Cost.COMPUTE_MATMUL, Cost.TRANSFER)))
    rng = np.random.default_rng(1)
    checked_critical = checked_slack = 0
    for edge in rng.choice(scalable, size=min(400, len(scalable)), replace=False):
        through = times[g.src[edge]] + weights[edge] + tail[g.dst[edge]]
        if not np.isfinite(through) or times[g.src[edge]] < start:
            continue  # not upstream of the window's end, or before the window opens
        slack = end - through
        d = 50_000.0  # 50 µs
        longer = weights.copy()
        longer[edge] += d
        new_start, new_end = run.window_bounds(g.replay(longer), 0, step)
        assert new_start == pytest.approx(start, abs=1e-3)
        assert new_end - end == pytest.approx(max(0.0, d - slack), abs=1e-3)
        checked_critical += slack <= 1e-6
        checked_slack += 1e-6 < slack < d
    assert checked_critical >= 5, "some sampled events lie on the critical path"
    assert checked_slack >= 1 or checked_critical >= 20


def test_shortening_an_exposed_collective_shortens_the_step_by_at_most_as_much(
    sample_warehouse: Path,
) -> None:
    _, run = _graph(sample_warehouse, "tiny-cpu-gloo", "fsdp-ws2")
    g = run.graph
    weights = g.measured_weights(run.transfer_ns)
    base = run.step_times(g.replay(weights))
    transfers = np.flatnonzero(g.cost == Cost.TRANSFER)
    for edge in transfers[:: max(1, len(transfers) // 30)]:
        d = min(weights[edge] - g.fixed[edge], 200_000.0)
        shorter = weights.copy()
        shorter[edge] -= d
        after = run.step_times(g.replay(shorter))
        for step, ranks in base.items():
            change = (max(ranks.values()) - max(after[step].values())) * 1000.0
            assert -1e-3 <= change <= d + 1e-3
