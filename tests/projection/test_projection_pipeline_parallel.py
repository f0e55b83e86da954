"""A change of pipeline parallelism (`--layout dp=1,pp=2` on a run without it): each step's main
thread is cut into the stages' regions without losing or doubling a piece, a stall of one step is not
repeated per micro-batch, the replay of the planned pipeline is GPipe's schedule (an independent
fixed-point oracle), the projected point names its layout and sits beside the pp run measured there,
and a layout the run cannot take is refused with its reason (sample study: ddp-ws1 against pp-ws2)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import hypothesis.strategies as st
import numpy as np
import pytest
import tracehouse
from hypothesis import given, settings
from tracehouse.collectors.model_sizes import MODELS, param_count, stage_layers, stage_params
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.efficiency import Curve, LatencyFit, category_curves
from tracehouse.pipeline.projection.memory import model_state
from tracehouse.pipeline.projection.project import layout_changed, scenario_times
from tracehouse.pipeline.projection.scenario import Scenario, layout_for
from tracehouse.pipeline.projection.stages import Piece, StepCut, cut_steps, typical
from tracehouse.pipeline.projection.timeline import load_run
from tracehouse.pipeline.warehouse.reading import open_reader

STUDY = "tiny-cpu-gloo"


@pytest.fixture(scope="module")
def ddp_ws1(sample_warehouse: Path):
    """ddp-ws1's timeline and the study's category curves."""
    with open_reader(sample_warehouse) as con:
        return load_run(con, STUDY, "ddp-ws1"), category_curves(con, STUDY, "cpu")


def test_the_cut_keeps_every_piece_of_the_step_once(ddp_ws1) -> None:
    timeline, curves = ddp_ws1
    for cut in cut_steps(timeline, 0, 2, 1, curves):  # one micro-batch: every piece at its own time
        pieces = [p for stage in (*cut.forward, *cut.backward) for p in stage]
        total = sum(p.ns for p in pieces) + sum(p.ns for p in cut.optimizer)
        assert total == cut.end_ns - cut.start_ns  # ddp-ws1 waits for no collective: nothing dropped
        labels = [{p.label for p in stage} for stage in cut.forward]
        assert "aten::embedding" in labels[0] and "aten::embedding" not in labels[1]
        assert "aten::_log_softmax" in labels[1] and "aten::_log_softmax" not in labels[0]  # the loss


def test_each_op_runs_at_a_micro_batch_of_its_work(ddp_ws1) -> None:
    timeline, curves = ddp_ws1
    whole, quarter = cut_steps(timeline, 0, 1, 1, curves), cut_steps(timeline, 0, 1, 4, curves)
    for a, b in zip(whole, quarter, strict=True):
        for p, q in zip(a.forward[0] + a.backward[0], b.forward[0] + b.backward[0], strict=True):
            assert (p.compute, p.label) == (q.compute, q.label)
            if not p.compute or p.label in ("aten::view", "aten::t", "aten::transpose"):
                assert q.ns == p.ns  # host gaps and per-call work: once per micro-batch, in full
            else:
                assert q.ns <= p.ns * 1.000001  # no op is slower at a quarter of its work
            if p.split is not None:
                assert q.split == (p.split[0], p.split[1] / 4)  # tensor parallelism's FLOPs, a quarter


def _cut(step: int, forward: list[float]) -> StepCut:
    return StepCut(step, 0, 0, [[Piece(ns, True, f"op{i}") for i, ns in enumerate(forward)]], [[]], [])


def test_a_stall_of_one_step_is_not_repeated_per_micro_batch() -> None:
    cuts = typical([_cut(1, [10.0, 20.0]), _cut(2, [10.0, 5000.0]), _cut(3, [12.0, 22.0])])
    assert [[p.ns for p in cut.forward[0]] for cut in cuts] == [[10.0, 22.0]] * 3
    other = [_cut(1, [10.0]), _cut(2, [10.0, 20.0])]  # steps that differ keep their own pieces
    assert [[p.ns for p in cut.forward[0]] for cut in typical(other)] == [[10.0], [10.0, 20.0]]


def _gpipe(cuts: list[StepCut], pp: int, m: int, shares: list[float]) -> dict[tuple[int, int], tuple]:
    """An oracle of the pipeline's replay with free transfers: the GPipe schedule of each stage's
    micro-batch work, solved by iterating its max-plus equations to their fixed point (every unknown
    from -inf up), independent of the graph's topological replay. (stage, step) -> (start, end) in ns
    after the first step's start."""
    forward = [[sum(p.ns for p in cut.forward[s]) for s in range(pp)] for cut in cuts]
    backward = [[sum(p.ns for p in cut.backward[s]) for s in range(pp)] for cut in cuts]
    optimizer = [
        [sum(p.ns * (shares[s] if p.compute else 1.0) for p in cut.optimizer) for s in range(pp)]
        for cut in cuts
    ]
    at = {}  # ("issue"|"post", direction, step, stage, micro-batch) -> ns
    out: dict[tuple[int, int], tuple] = {}
    inf = -math.inf
    for _ in range(4 * pp * m * len(cuts) + 4):
        before = dict(at), dict(out)
        for s in range(pp):
            end = None
            for k, cut in enumerate(cuts):
                cur = 0.0 if k == 0 else end + (cut.start_ns - cuts[k - 1].end_ns)
                start = cur
                for i in range(m):
                    if s > 0:
                        at["post", "f", k, s, i] = cur
                        cur = max(cur, at.get(("issue", "f", k, s - 1, i), inf))
                    cur += forward[k][s]
                    at["issue", "f", k, s, i] = cur
                if s < pp - 1:  # the sender waits for every send, each until its receiver posts it
                    cur = max([cur, *(at.get(("post", "f", k, s + 1, i), inf) for i in range(m))])
                for i in range(m):
                    if s < pp - 1:
                        at["post", "b", k, s, i] = cur
                        cur = max(cur, at.get(("issue", "b", k, s + 1, i), inf))
                    cur += backward[k][s]
                    at["issue", "b", k, s, i] = cur
                if s > 0:
                    cur = max([cur, *(at.get(("post", "b", k, s - 1, i), inf) for i in range(m))])
                end = cur + optimizer[k][s]
                out[s, k] = (start, end)
        if (at, out) == before:
            return out
    raise AssertionError("the oracle did not settle")


@pytest.mark.parametrize("microbatches", [1, 2, 4])
def test_the_pipeline_replays_gpipe_s_schedule(sample_warehouse: Path, ddp_ws1, microbatches: int) -> None:
    timeline, curves = ddp_ws1
    with open_reader(sample_warehouse) as con:
        run = layout_changed(con, timeline, None, None, (2, microbatches))
    layout = layout_for(timeline.facts, 2, None, None, (2, microbatches))
    times = scenario_times("ddp-ws1", run, layout, Scenario(ideal_network=True), None, {}, None)
    cuts = typical(cut_steps(timeline, 0, 2, microbatches, curves))
    model = timeline.facts.model
    shares = [stage_params(model, 2, s) / param_count(model) for s in range(2)]
    expected = _gpipe(cuts, 2, microbatches, shares)
    origin = run.graph.origin - cuts[0].start_ns
    for w in run.windows:
        for k, step in enumerate(w.steps):
            lo, hi = run.window_bounds(times, w.rank, step)
            assert (lo + origin, hi + origin) == pytest.approx(expected[w.rank, k], abs=1.0)  # ns
    # the last stage idles while the first fills the pipeline: its window is no shorter
    assert run.step_times(times)[cuts[0].step][1] > 0


def test_a_pipeline_point_names_its_layout_and_sits_beside_the_pp_run(
    sample_warehouse: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    (result,) = tracehouse.project(warehouse, study=STUDY, run="ddp-ws1", layout=["dp=1,pp=2", "dp=2,pp=2"])
    assert result.as_kind == "ddp,pp=2" and result.identity.max_error < 1e-6  # the measured run's own replay
    at_two, at_four = result.points
    assert (at_two.layout, at_four.layout) == ("dp=1,pp=2,microbatches=4", "dp=2,pp=2,microbatches=4")
    assert at_two.measured_run_id == "pp-ws2" and at_two.measured_step_time_us > 0
    assert at_two.exposed_comm_pp_frac > 0 and at_two.exposed_comm_dp_frac == 0  # one pipeline: no dp
    assert at_four.exposed_comm_dp_frac > 0  # each stage's gradients across two pipelines
    planned = json.loads(at_two.provenance)["collectives"]["planned"]
    # 3 steps x 4 micro-batches x (activations forward, their gradients backward); each stage's
    # 631,424 / 2 parameters in fp32 fill one bucket of 1 MiB and one more
    assert planned == {"send": 24, "all_reduce": 3 * 2 * 2}
    assert "pipeline parallelism of degree 2 with tracehouse collect's micro-batches" in at_two.assumptions
    n = result.facts.n_params
    assert model_state(result.facts, 1, sharded=False, pp=2) == (4 * n / 2, 4 * n / 2, 8 * n / 2)
    assert at_two.memory_bytes == 16 * n / 2  # no memory events: model state alone
    # the band (a doubling from the measured size, a changed layout) holds the pp run measured there
    assert at_two.step_time_low_us <= at_two.measured_step_time_us <= at_two.step_time_high_us


@pytest.mark.parametrize(
    ("run", "layout", "says"),
    [
        (
            "fsdp-ws1",
            "fsdp=1,pp=2",
            "a pipeline's data-parallel replicas are DDP's (tracehouse collect's pp)",
        ),
        (
            "ddp-ws1",
            "dp=1,pp=2,microbatches=3",
            "a pipeline's 8 sequences a step do not split into 3 micro-batches",
        ),
        ("ddp-ws1", "dp=1,pp=4", "pp=4 exceeds its model's 2 layers"),
        ("ddp-ws1", "dp=1,tp=2,pp=2", "not with tp added"),
        ("pp-ws2", "dp=1,pp=1", "the layout's pp=1 differs from the run's pp=2"),
    ],
)
def test_a_pipeline_the_run_cannot_take_is_refused_with_the_reason(
    sample_warehouse: Path, run: str, layout: str, says: str
) -> None:
    with pytest.raises(TracehouseError) as refused:
        tracehouse.project(sample_warehouse, study=STUDY, run=run, layout=layout)
    assert says in str(refused.value) and "\n" not in str(refused.value)


@settings(max_examples=60, deadline=None)
@given(
    st.floats(0.0, 1e4),
    st.one_of(st.just(0.0), st.floats(1e-3, 10.0)),
    st.lists(st.integers(0, 40), min_size=2, max_size=12, unique=True),
)
def test_a_latency_fit_recovers_a_line_and_keeps_an_op_at_its_own_size(
    latency: float, per_unit: float, exponents: list[int]
) -> None:
    if latency + per_unit * 2.0 ** min(exponents) < 1.0:  # a call takes at least a ns
        return
    work = np.exp2(np.array(sorted(exponents), dtype=float))
    ns = latency + per_unit * work
    fit = LatencyFit.of(Curve("elementwise", np.log2(work), np.log2(work / ns), len(work), "bytes"))
    assert fit.time_ratio(work, work / 4) == pytest.approx((latency + per_unit * work / 4) / ns, rel=1e-6)
    assert fit.time_ratio(work, work) == pytest.approx(1.0)


@given(st.sampled_from(sorted(MODELS)), st.integers(1, 8))
def test_the_stages_hold_the_model_once(name: str, pp: int) -> None:
    cfg = MODELS[name]
    if pp > cfg.n_layers:
        return
    assert sum(stage_params(cfg, pp, s) for s in range(pp)) == param_count(cfg)
    assert [i for s in range(pp) for i in stage_layers(cfg.n_layers, pp, s)] == list(range(cfg.n_layers))
