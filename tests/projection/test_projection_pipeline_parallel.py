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
from tracehouse.pipeline.projection.layouts import SCHEDULES, Pipeline
from tracehouse.pipeline.projection.memory import in_flight, memory_need, model_state
from tracehouse.pipeline.projection.project import layout_changed, scenario_times
from tracehouse.pipeline.projection.scenario import Scenario, layout_for
from tracehouse.pipeline.projection.stages import Piece, StepCut, cut_steps, schedule_actions, typical
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


class _Recorder:
    """A stage as torch's schedules drive it: what they compute, send, receive and wait for, in order."""

    def __init__(self, pp: int, stage: int, log: list) -> None:
        self.stage_index, self.log = stage, log
        self.is_first, self.is_last = stage == 0, stage == pp - 1

    def _ops(self, kind: str, direction: str, m: int, upstream: bool) -> list[tuple]:
        return [] if (self.is_first if upstream else self.is_last) else [(kind, direction, m)]

    def get_fwd_recv_ops(self, m: int) -> list[tuple]:
        return self._ops("recv", "forward", m, True)

    def get_fwd_send_ops(self, m: int) -> list[tuple]:
        return self._ops("send", "forward", m, False)

    def get_bwd_recv_ops(self, m: int) -> list[tuple]:
        return self._ops("recv", "backward", m, False)

    def get_bwd_send_ops(self, m: int) -> list[tuple]:
        return self._ops("send", "backward", m, True)

    def forward_one_chunk(self, m: int, *args, **kwargs) -> None:
        self.log.append(("compute", "forward", m))

    def backward_one_chunk(self, m: int, **kwargs) -> None:
        self.log.append(("compute", "backward", m))

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None  # losses, gradient scaling: not the schedule's order


def _torch_program(schedule: str, pp: int, m: int, stage: int, monkeypatch) -> list[tuple]:
    """The stage's step as torch's own ScheduleGPipe / Schedule1F1B runs it (`_step_microbatches`)
    on a recording stage: computes, the sends and receives it issues, and its waits (consecutive
    waits as one: a wait for several works)."""
    from torch.distributed.pipelining import schedules

    log: list[tuple] = []
    cls = {"gpipe": schedules.ScheduleGPipe, "1f1b": schedules.Schedule1F1B}[schedule]
    runner = object.__new__(cls)  # its order needs no process group
    runner._n_microbatches, runner._num_stages, runner._stage = m, pp, _Recorder(pp, stage, log)
    runner.scale_grads = False
    runner._check_inputs = lambda *args: ([None] * m, [{}] * m)
    for name in ("_initialize_stage", "_maybe_compute_loss", "_maybe_get_loss", "_update_losses"):
        setattr(runner, name, lambda *args, **kwargs: None)

    def issued(ops, desc=None):
        log.extend(ops)
        return list(ops)

    def waited(work) -> None:
        if work and log and log[-1][0] == "wait":
            log[-1] = ("wait", [*log[-1][1], *work])
        elif work:
            log.append(("wait", list(work)))

    monkeypatch.setattr(schedules, "_batch_p2p", issued)
    monkeypatch.setattr(
        schedules, "_sorted_batch_p2p", lambda ops, desc=None: dict(enumerate(issued([op]) for op in ops))
    )
    monkeypatch.setattr(schedules, "_wait_batch_p2p", waited)
    runner._step_microbatches([None] * m, [{}] * m, None, None)
    return log


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_each_stage_follows_torch_s_schedule(schedule: str, monkeypatch) -> None:
    for pp in (2, 3, 4):
        for m in range(1, 7):
            for stage in range(pp):
                ours = []
                for action in schedule_actions(schedule, pp, m, stage):
                    if action[0] != "wait":
                        ours.append(action)
                    elif handles := [h for h in action[1] if h != ("buckets",)]:
                        ours.append(("wait", handles))
                assert ours == _torch_program(schedule, pp, m, stage, monkeypatch), (pp, m, stage)


def _oracle(
    cuts: list[StepCut], programs: list[list[tuple]], shares: list[float]
) -> tuple[dict[tuple[int, int], tuple], dict[tuple, float]]:
    """An oracle of the pipeline's replay with free transfers: each stage's program (torch's order)
    over each step's regions, solved by iterating its max-plus equations to their fixed point (every
    unknown from -inf up), independent of the graph's topological replay: a compute adds its
    region's time, a send or receive is posted at the stage's instant, and a wait lasts until the
    peer of each awaited one has posted its own. (stage, step) -> (start, end), and (step, stage,
    send or recv) -> when it was posted, in ns after the first step's start."""
    pp = len(programs)
    forward = [[sum(p.ns for p in cut.forward[s]) for s in range(pp)] for cut in cuts]
    backward = [[sum(p.ns for p in cut.backward[s]) for s in range(pp)] for cut in cuts]
    optimizer = [
        [sum(p.ns * (shares[s] if p.compute else 1.0) for p in cut.optimizer) for s in range(pp)]
        for cut in cuts
    ]
    posted: dict[tuple, float] = {}  # (step, stage, send or recv) -> ns
    out: dict[tuple[int, int], tuple] = {}
    inf = -math.inf

    def peer(stage: int, action: tuple) -> tuple:
        kind, direction, m = action
        upstream = (kind == "recv") == (direction == "forward")
        return stage - 1 if upstream else stage + 1, ("send" if kind == "recv" else "recv", direction, m)

    for _ in range(8 * pp * len(programs[0]) * len(cuts) + 4):
        before = dict(posted), dict(out)
        for s, program in enumerate(programs):
            end = 0.0
            for k, cut in enumerate(cuts):
                cur = 0.0 if k == 0 else end + (cut.start_ns - cuts[k - 1].end_ns)
                start = cur
                for action in program:
                    if action[0] == "compute":
                        cur += (forward if action[1] == "forward" else backward)[k][s]
                    elif action[0] == "wait":
                        cur = max([cur, *(posted.get((k, *peer(s, a)), inf) for a in action[1])])
                    else:
                        posted[k, s, action] = cur
                end = cur + optimizer[k][s]
                out[s, k] = (start, end)
        if (posted, out) == before:
            return out, posted
    raise AssertionError("the oracle did not settle")


@pytest.mark.parametrize(
    ("schedule", "microbatches"), [("gpipe", 1), ("gpipe", 2), ("gpipe", 4), ("1f1b", 2), ("1f1b", 4)]
)
def test_the_pipeline_replays_torch_s_schedule(
    sample_warehouse: Path, ddp_ws1, schedule: str, microbatches: int, monkeypatch
) -> None:
    timeline, curves = ddp_ws1
    pipeline = Pipeline(2, microbatches, schedule)
    with open_reader(sample_warehouse) as con:
        run = layout_changed(con, timeline, None, None, pipeline)
    layout = layout_for(timeline.facts, 2, None, None, pipeline)
    times = scenario_times("ddp-ws1", run, layout, Scenario(ideal_network=True), None, {}, None)
    cuts = typical(cut_steps(timeline, 0, 2, microbatches, curves))
    model = timeline.facts.model
    shares = [stage_params(model, 2, s) / param_count(model) for s in range(2)]
    programs = [_torch_program(schedule, 2, microbatches, s, monkeypatch) for s in range(2)]
    expected, posted = _oracle(cuts, programs, shares)
    origin = run.graph.origin - cuts[0].start_ns
    for w in run.windows:
        for k, step in enumerate(w.steps):
            lo, hi = run.window_bounds(times, w.rank, step)
            assert (lo + origin, hi + origin) == pytest.approx(expected[w.rank, k], abs=1.0)  # ns
    # each activation and gradient is sent and received when the schedule posts it (the orders differ)
    sent = 0
    for key, i in run.instances.key_index.items():
        if key[1] != "pp":
            continue
        *_, low, step, direction, m = key
        k = [cut.step for cut in cuts].index(step)
        for rank, start, _ in run.instances.members[i]:
            kind = "send" if (rank == low) == (direction == "forward") else "recv"
            assert times[start] + origin == pytest.approx(posted[k, rank, (kind, direction, m)], abs=1.0)
            sent += kind == "send"
    assert sent == 2 * microbatches * len(cuts)
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


def test_a_1f1b_pipeline_names_its_schedule_and_holds_fewer_micro_batches(
    sample_warehouse: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    layout = "dp=1,pp=2,microbatches=4,schedule=1f1b"
    (result,) = tracehouse.project(warehouse, study=STUDY, run="ddp-ws1", layout=layout)
    (point,) = result.points
    assert point.layout == layout and point.scenario == "as-ddp+pp2+mb4+1f1b"
    assert "replayed per micro-batch in 1F1B's order" in point.assumptions
    # tracehouse collect's pipelines run GPipe: pp-ws2 is not this schedule's measurement
    assert point.measured_run_id is None and point.exposed_comm_pp_frac > 0
    # 1F1B's first stage holds the activations of pp = 2 of the 4 micro-batches at once, GPipe's all 4
    facts = result.facts
    gpipe, one_f = (layout_for(facts, 2, None, None, Pipeline(2, 4, s)) for s in SCHEDULES)
    assert (in_flight(gpipe), in_flight(one_f)) == (1.0, 0.5)
    state = sum(model_state(facts, 1, sharded=False))
    peak = state + 8e6  # 8 MB of activations measured on the one rank, its 2 layers' and 4 micro-batches'
    need = memory_need(
        facts, dp=1, dp_new=1, sharded=False, tokens=1.0, peak=peak, capacity=None, pp_new=2, in_flight=0.5
    )
    assert need.activations == pytest.approx(8e6 / 2 * 0.5)
