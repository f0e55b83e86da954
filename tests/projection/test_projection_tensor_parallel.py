"""A change of tensor parallelism (`--layout dp=1,tp=2` on a run without it): the collectives planned
per layer equal what the same workload issues measured with tp=2 (sample study: ddp-ws1 and
ddp-ws2 against tp-ws2), the split ops take the time the study's efficiency curves give them and
the rest keeps its own, the measured replay is unchanged, and the stored point names its layout,
sits beside the tp run measured there and holds half the parameters."""

from __future__ import annotations

import math
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
import tracehouse
from hypothesis import given, settings
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.build import build_run_graph
from tracehouse.pipeline.projection.efficiency import SPLIT_CLASSES, fit_curve, split_factors, study_curves
from tracehouse.pipeline.projection.graph import Cost
from tracehouse.pipeline.projection.memory import model_state
from tracehouse.pipeline.projection.project import identity_check
from tracehouse.pipeline.projection.scenario import (
    Scenario,
    instance_target,
    instance_transfers,
    layout_for,
    scaled_weights,
)
from tracehouse.pipeline.projection.synthetic import planned_tp_collectives
from tracehouse.pipeline.projection.timeline import load_run
from tracehouse.pipeline.warehouse.reading import open_reader

STUDY = "tiny-cpu-gloo"


@pytest.fixture(scope="module")
def projected(sample_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    """ddp-ws2 projected to dp=1,tp=2 (2 devices, where tp-ws2 was measured) and dp=2,tp=2."""
    warehouse = tmp_path_factory.mktemp("tp") / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    results = tracehouse.project(warehouse, study=STUDY, run="ddp-ws2", layout=["dp=1,tp=2", "dp=2,tp=2"])
    return warehouse, results


def _measured_per_step(con, run_id: str) -> Counter:
    rows = con.execute(
        "SELECT op, bytes, phase FROM comm_intervals WHERE study = ? AND run_id = ? AND rank = 0",
        [STUDY, run_id],
    ).fetchall()
    return Counter({key: n / 3 for key, n in Counter(rows).items()})  # 3 profiled steps


@pytest.mark.parametrize("run_id", ["ddp-ws1", "ddp-ws2"])
def test_the_planned_layer_collectives_are_what_the_tp_run_issues(
    sample_warehouse: Path, run_id: str
) -> None:
    with open_reader(sample_warehouse) as con:
        t = load_run(con, STUDY, run_id)
        measured = _measured_per_step(con, "tp-ws2")
    steps = t.steps.filter(t.steps["rank"] == 0).sort("start_ns")
    planned = planned_tp_collectives(t, 0, steps, 2)
    # tp-ws2 runs the same 8 sequences a step on one data-parallel rank; ddp-ws2 half of them on each
    # of two, so its activations are half the size
    share = t.facts.data_parallel
    forward = {(p.op, p.bytes * share) for p in planned if p.key[2] < 6}
    assert {(op, size) for (op, size, phase) in measured if phase == "forward"} == forward
    per_step = Counter((p.op, p.bytes * share) for p in planned)
    assert {key: n / 3 for key, n in per_step.items()} == {
        (op, size): sum(n for (o, s, _), n in measured.items() if (o, s) == (op, size))
        for op, size in per_step
    }
    assert all(p.dim == "tp" and p.group_size == 2 and p.issue_ns == p.wait_ns for p in planned)
    within = steps.select(["start_ns", "end_ns"]).rows()
    assert all(any(lo <= p.issue_ns <= hi for lo, hi in within) for p in planned)


def test_the_planned_split_leaves_the_measured_replay_unchanged(sample_warehouse: Path) -> None:
    with open_reader(sample_warehouse) as con:
        t = load_run(con, STUDY, "ddp-ws1")
    run = build_run_graph(t, None, 2)
    assert run.tp == 2 and sum(k[2] == "tp" for k in run.instances.key_index if k[0] == "synthetic") == 51
    assert identity_check(run, t.measured_windows()).max_error < 1e-6


def test_split_ops_take_the_curves_time_and_the_rest_keeps_its_own(sample_warehouse: Path) -> None:
    with open_reader(sample_warehouse) as con:
        t = load_run(con, STUDY, "ddp-ws1")
        curves = study_curves(con, STUDY, "cpu")
    assert [curves[code].op_class for code in sorted(curves)] == list(SPLIT_CLASSES)
    run = replace(build_run_graph(t, None, 2), curves=curves)
    g = run.graph
    layout = layout_for(t.facts, 2, tp=2)
    assert (layout.dp_new, layout.tp_target, layout.world_size_new) == (1, 2, 2)
    as_tp = scaled_weights(run, layout, Scenario(tensor_parallel=2))
    as_measured = scaled_weights(run, layout_for(t.facts, 1), Scenario())
    split = g.split_class >= 0
    assert split.sum() > 100 and (g.cost[split] == Cost.COMPUTE_OTHER).all()
    for code, curve in curves.items():
        mine = g.split_class == code
        ratio = curve.time_ratio(g.split_flops[mine], g.split_flops[mine] / 2)
        np.testing.assert_allclose(as_tp[mine], g.fixed[mine] + g.base[mine] * ratio, rtol=1e-12)
    rest = ~split & (g.phase != 1)  # the optimizer holds half the parameters: half its work
    np.testing.assert_array_equal(as_tp[rest], as_measured[rest])
    # the matmuls at half their FLOPs run slower per FLOP on this CPU: more than half their time
    assert 0.5 < as_tp[split].sum() / as_measured[split].sum() < 1


def test_the_gradients_a_rank_holds_follow_its_share_and_a_group_of_one_is_dropped(
    sample_warehouse: Path,
) -> None:
    with open_reader(sample_warehouse) as con:
        t = load_run(con, STUDY, "ddp-ws2")
    run = build_run_graph(t, None, 2)
    inst = run.instances
    gradients = [
        i
        for i, (dim, op) in enumerate(zip(inst.dim, inst.op, strict=True))
        if dim == "dp" and op == "all_reduce"
    ]
    assert gradients and all(not run.planned[i] for i in gradients)  # ddp-ws2's own all-reduces
    scenario = Scenario(tensor_parallel=2)
    # at dp=2,tp=2 each rank holds half the parameters: half the gradient bytes, the same 2 replicas
    wide = layout_for(t.facts, 4, tp=2)
    for i in gradients:
        assert instance_target(run, i, wide, scenario, 1.0) == (2, inst.bytes[i] / 2, True)
    # at dp=1,tp=2 a data-parallel group is one rank: the all-reduce is dropped, not timed
    dropped = instance_transfers(run, layout_for(t.facts, 2, tp=2), scenario, None, {}).dropped
    assert (
        dropped[gradients].all()
        and not dropped[[i for i in range(len(inst.dim)) if inst.dim[i] == "tp"]].any()
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(1e3, 1e12), st.floats(1e-3, 1e3)),  # FLOPs, FLOP/ns
        min_size=1,
        max_size=40,
    ),
    st.floats(1e2, 1e13),
)
def test_an_op_at_its_own_size_keeps_its_time_and_the_curve_is_flat_beyond_its_bins(points, flops) -> None:
    f = np.array([p[0] for p in points])
    rate = np.array([p[1] for p in points])
    curve = fit_curve("matmul", f, f / rate)
    assert curve.calls == len(points)
    assert curve.time_ratio(np.array([flops]), np.array([flops]))[0] == pytest.approx(1.0)
    # one bin: its median rate everywhere
    if len(set(np.floor(np.log2(f)))) == 1:
        assert curve.rate(np.array([flops]))[0] == pytest.approx(float(np.exp2(np.median(np.log2(rate)))))
    lo, hi = np.exp2(curve.log_flops[[0, -1]])
    assert curve.rate(np.array([lo / 10]))[0] == pytest.approx(curve.rate(np.array([lo]))[0])
    assert curve.rate(np.array([hi * 10]))[0] == pytest.approx(curve.rate(np.array([hi]))[0])


def test_a_class_without_a_curve_scales_with_its_flops() -> None:
    factor = split_factors({}, np.array([-1, 0, 1]), np.array([0.0, 8e6, 2e6]), 0.25)
    assert factor.tolist() == [1.0, 0.25, 0.25]


def test_the_point_names_its_layout_and_sits_beside_the_tp_run(projected: tuple[Path, list]) -> None:
    _, (run,) = projected
    assert run.label == "ddp-ws2 as ddp,tp=2"
    assert [(p.world_size, p.layout, p.measured_run_id) for p in run.points] == [
        (2, "dp=1,tp=2", "tp-ws2"),
        (4, "dp=2,tp=2", None),
    ]
    assert {p.scenario for p in run.points} == {"as-ddp+tp2"}
    at_two = run.points[0]
    assert at_two.exposed_comm_tp_frac > 0.2  # the layers' all-reduces, each blocking
    assert "tensor parallelism of degree 2" in at_two.assumptions
    assert "efficiency curves (matmul: " in at_two.assumptions and "; attention: " in at_two.assumptions
    # half the parameters per device: weights, gradients and AdamW's moments (fp32: 4 + 4 + 8 B each)
    n = run.facts.n_params
    assert model_state(run.facts, 1, sharded=False, tp=2) == (4 * n / 2, 4 * n / 2, 8 * n / 2)
    assert at_two.memory_bytes == 16 * n / 2  # the sample traces have no memory events: no activations
    # checked against tp-ws2: the band widens by that check's error at the run's own size
    error = math.log(at_two.step_time_us / at_two.measured_step_time_us)
    assert at_two.step_time_high_us / at_two.step_time_us == pytest.approx(math.exp(abs(error)), rel=1e-6)


def test_a_change_of_tp_the_run_cannot_take_is_refused_with_the_reason(sample_warehouse: Path) -> None:
    with pytest.raises(TracehouseError, match="not yet from one with another degree"):
        tracehouse.project(sample_warehouse, study=STUDY, run="tp-ws2", layout="dp=1,tp=4")
    with pytest.raises(TracehouseError, match="the layout's pp=1 differs from the run's pp=2: a change of"):
        tracehouse.project(sample_warehouse, study=STUDY, run="pp-ws2", layout="dp=1,tp=2")
    with pytest.raises(TracehouseError) as uneven:  # 2 key-value heads cannot be split 4 ways
        tracehouse.project(sample_warehouse, study=STUDY, run="ddp-ws1", layout="dp=1,tp=4")
    assert str(uneven.value) == f"{STUDY}/ddp-ws1: tp=4 does not divide its model's kv heads 2"
