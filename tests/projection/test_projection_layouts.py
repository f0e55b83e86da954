"""A change of layout (`--layout`): the layout text, a run projected as the other data-parallel kind
(its measured data-parallel collectives dropped, the other kind's planned and joined across its
ranks), the band such a point gets, and the rows it stores (sample study)."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import tracehouse
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.band import (
    DEFAULT_LAYOUT_ERROR,
    Band,
    Check,
    with_layout_error,
)
from tracehouse.pipeline.projection.build import build_run_graph
from tracehouse.pipeline.projection.graph import Cost, Phase
from tracehouse.pipeline.projection.layouts import LayoutSpec, parse_layout, strategy_as
from tracehouse.pipeline.projection.project import scenario_times
from tracehouse.pipeline.projection.scenario import (
    Scenario,
    instance_transfers,
    layout_for,
    scaled_weights,
    with_transfers,
)
from tracehouse.pipeline.projection.timeline import load_run
from tracehouse.pipeline.warehouse.reading import open_reader

from tests.support.wh_helpers import query

STUDY = "tiny-cpu-gloo"


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("dp=64", LayoutSpec("ddp", 64)),
        ("fsdp=8, tp=2", LayoutSpec("fsdp", 8, tp=2)),
        ("DP=8,tp=4,pp=4,microbatches=16", LayoutSpec("ddp", 8, 4, 4, 16)),
        ("dp=8,pp=4,schedule=1F1B", LayoutSpec("ddp", 8, 1, 4, schedule="1f1b")),
        ("dp=8,pp=4,microbatches=8,schedule=gpipe", LayoutSpec("ddp", 8, 1, 4, 8)),  # the default
    ],
)
def test_a_layout_reads_as_written_and_writes_back(text: str, spec: LayoutSpec) -> None:
    assert parse_layout(text) == spec
    assert parse_layout(spec.text()) == spec
    assert spec.world_size == spec.dp * spec.tp * spec.pp


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tp=2", "give the data-parallel degree once"),
        ("dp=2,fsdp=2", "give the data-parallel degree once"),
        ("dp=2,dp=4", "dp is given twice"),
        ("dp=0", "dp must be a positive integer"),
        ("dp=two", "dp=two is not an integer"),
        ("dp=2,ep=2", "'ep=2' is not one of dp=N, fsdp=N, tp=N, pp=N, microbatches=N, schedule=gpipe|1f1b"),
        ("dp=2,microbatches=4", "microbatches needs pipeline parallelism"),
        ("dp=2,schedule=1f1b", "schedule needs pipeline parallelism"),
        ("dp=2,pp=2,schedule=zb", "schedule=zb is not one of gpipe, 1f1b"),
        ("dp=2,pp=2,schedule=1f1b,schedule=1f1b", "schedule is given twice"),
    ],
)
def test_a_layout_that_cannot_be_read_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(TracehouseError, match="layout '") as error:
        parse_layout(text)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_a_strategy_with_the_other_data_parallel_kind() -> None:
    assert strategy_as("ddp", "fsdp") == "fsdp" and strategy_as("fsdp", "ddp") == "ddp"
    assert strategy_as("tp", "fsdp") == "fsdp_tp" and strategy_as("fsdp_tp", "ddp") == "tp"
    assert strategy_as("pp", "fsdp") is None  # no measured strategy names it
    assert strategy_as("ddp", None, pp=2) == strategy_as("fsdp", "ddp", pp=2) == "pp"
    assert strategy_as("ddp", "fsdp", pp=2) is None and strategy_as("ddp", None, tp=2, pp=2) is None
    assert strategy_as("ddp", None) == strategy_as("ddp", "ddp") == "ddp"


def _check(run: str, ws: int, to: int, projected: float, measured: float) -> Check:
    return Check(STUDY, run, ws, to, "other", projected, measured)


def test_the_layout_error_is_the_worst_change_of_kind_at_the_run_s_own_size() -> None:
    band = Band(0.1, "study")
    checks = [
        _check("a", 2, 2, 130.0, 100.0),
        _check("b", 2, 2, 70.0, 100.0),
        _check("a", 2, 4, 500.0, 100.0),
    ]
    widened = with_layout_error(band, checks)
    assert widened.layout_error == pytest.approx(abs(math.log(0.7)))  # b: 30 % short beats a's 30 % long
    assert widened.layout_basis.startswith("study: 2 run(s) projected with a changed layout at their own")
    # a point that changes the kind: replay + rate x doublings + the layout error; others as before
    assert widened.factor(8, 2, 0.01, changes_kind=True) == pytest.approx(
        math.exp(0.01 + 0.2 + widened.layout_error)
    )
    assert widened.factor(8, 2, 0.01) == band.factor(8, 2, 0.01) == pytest.approx(math.exp(0.21))
    default = with_layout_error(band, [checks[2]])
    assert default.layout_error == DEFAULT_LAYOUT_ERROR and default.layout_basis.startswith("default")
    assert math.log(65.77 / 47.99) == pytest.approx(DEFAULT_LAYOUT_ERROR, abs=1e-3)  # docs/projection.md


@pytest.mark.parametrize(
    ("run_id", "kind", "dropped_op"), [("ddp-ws2", "fsdp", "all_reduce"), ("fsdp-ws2", "ddp", "all_gather")]
)
def test_as_the_other_kind_the_measured_collectives_take_no_time_and_the_planned_ones_end_together(
    sample_warehouse: Path, run_id: str, kind: str, dropped_op: str
) -> None:
    with open_reader(sample_warehouse) as con:
        t = load_run(con, STUDY, run_id)
    run = build_run_graph(t, kind)
    layout = layout_for(t.facts, 2, kind)
    assert layout.changes_kind and layout.sharded_optimizer == (kind == "fsdp")
    times = scenario_times(
        run_id, run, layout, Scenario(data_parallel=kind, interference=False), None, {}, None
    )
    inst = run.instances
    measured = [i for i in range(len(inst.members)) if not run.planned[i]]
    assert measured and {inst.op[i] for i in measured} >= {dropped_op}
    for i in measured:  # dropped: each member ends where it starts, waiting for no other rank
        assert all(times[end] == times[start] for _, start, end in inst.members[i])
    for i in np.flatnonzero(run.planned):  # planned, no network: both ranks leave at the last arrival
        ends = {times[end] for _, _, end in inst.members[i]}
        assert ends == {times[inst.arrival[i]]}


@pytest.fixture(scope="module")
def as_fsdp(sample_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    warehouse = tmp_path_factory.mktemp("layouts") / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    common = ["project", "--warehouse", str(warehouse), "--study", STUDY]
    assert main([*common, "--world-sizes", "2"]) == 0  # the baseline and its checks
    before = query(warehouse, "SELECT * EXCLUDE (checked_at) FROM projection_checks ORDER BY ALL")
    assert main([*common, "--run", "ddp-ws1", "--layout", "fsdp=2", "fsdp=4"]) == 0
    after = query(warehouse, "SELECT * EXCLUDE (checked_at) FROM projection_checks ORDER BY ALL")
    assert after == before  # a change of kind checks itself, but stores no check in the run's place
    return warehouse, "as-fsdp"


def test_a_layout_s_points_name_it_and_sit_beside_the_kind_measured_there(as_fsdp: tuple[Path, str]) -> None:
    warehouse, scenario = as_fsdp
    rows = query(
        warehouse,
        "SELECT world_size, layout, measured_run_id, provenance FROM projections "
        "WHERE run_id = 'ddp-ws1' AND scenario = ? ORDER BY world_size",
        [scenario],
    )
    assert [r[:3] for r in rows] == [
        (1, "fsdp=1", "fsdp-ws1"),
        (2, "fsdp=2", "fsdp-ws2"),
        (4, "fsdp=4", "fsdp-ws4"),
    ]
    planned = json.loads(rows[1][3])["collectives"]["planned"]
    assert planned == {"all_gather": 15, "reduce_scatter": 9}  # 3 steps: 5 and 3 a step, as fsdp-ws2 issues
    band = json.loads(rows[1][3])["band"]
    assert band["layout_basis"].startswith("study: 1 run(s) projected with a changed layout at their own")
    baseline = query(
        warehouse,
        "SELECT DISTINCT layout FROM projections "
        "WHERE run_id = 'ddp-ws1' AND scenario = 'baseline' ORDER BY 1",
    )
    assert baseline == [("dp=1",), ("dp=2",)]


def test_a_layout_the_run_cannot_take_is_refused_with_the_reason(sample_warehouse: Path, capsys) -> None:
    common = ["project", "--warehouse", str(sample_warehouse), "--study", STUDY, "--run", "ddp-ws1"]
    capsys.readouterr()
    assert main([*common, "--layout", "fsdp=2,pp=2"]) == 2
    assert "a pipeline's data-parallel replicas are DDP's" in capsys.readouterr().err
    assert main([*common, "--layout", "fsdp=2", "dp=4"]) == 2
    assert "differ only in their data-parallel degree: fsdp=2, dp=4" in capsys.readouterr().err
    assert main([*common, "--layout", "fsdp=2", "--devices", "4"]) == 2
    assert "give --devices or --layout, not both" in capsys.readouterr().err
    assert main([*common]) == 2
    assert "--devices 16,32,...) or --layout" in capsys.readouterr().err


def test_a_notebook_projects_a_layout_as_the_command_does(sample_warehouse: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    (run,) = tracehouse.project(warehouse, study=STUDY, run="fsdp-ws1", layout=["dp=2", "dp=4"])
    assert [(p.world_size, p.layout, p.measured_run_id) for p in run.points] == [
        (1, "dp=1", "ddp-ws1"),
        (2, "dp=2", "ddp-ws2"),
        (4, "dp=4", "ddp-ws4"),
    ]
    assert {p.scenario for p in run.points} == {"as-ddp"}
    assert "data parallelism as DDP" in run.points[0].assumptions
    with pytest.raises(TracehouseError, match="give world_sizes or layout, not both"):
        tracehouse.project(warehouse, study=STUDY, run="fsdp-ws1", layout="dp=2", world_sizes=[2])


@pytest.mark.parametrize(
    ("run_id", "kind", "size"), [("ddp-ws1", None, 2), ("ddp-ws2", "fsdp", 2), ("fsdp-ws1", None, 4)]
)
def test_waiting_for_a_planned_collective_is_no_compute(
    sample_warehouse: Path, run_id: str, kind: str | None, size: int
) -> None:
    """Every compute interval of the replay lasts exactly its compute edge's weight: the wait for
    a planned collective is a step of its own, never folded into the compute piece before it."""
    with open_reader(sample_warehouse) as con:
        t = load_run(con, STUDY, run_id)
    run = build_run_graph(t, kind)
    layout = layout_for(t.facts, size, kind)
    scenario = Scenario(data_parallel=kind, interference=False)
    transfers = instance_transfers(run, layout, replace(scenario, ideal_network=True), None, {})
    transfers.ns[run.planned] = 5e6  # 5 ms each: long enough to show where it is waited for
    weights = with_transfers(run, scaled_weights(run, layout, scenario), transfers.ns, transfers.dropped)
    times = run.graph.replay(weights)
    g = run.graph
    compute = {
        (int(s), int(d)): w
        for s, d, w, c in zip(g.src, g.dst, weights, g.cost, strict=True)
        if c == Cost.COMPUTE_OTHER
    }
    intervals = [(s, e) for _, s, e, cls, _ in run.intervals if cls == "compute"]
    assert intervals and all(
        times[e] - times[s] == pytest.approx(compute[(s, e)], abs=1e-6) for s, e in intervals
    )


def test_fsdp_s_own_host_work_is_gone_when_it_is_projected_as_ddp(sample_warehouse: Path) -> None:
    with open_reader(sample_warehouse) as con:
        t = load_run(con, STUDY, "fsdp-ws2")
    run = build_run_graph(t, "ddp")
    hooks = run.graph.phase == Phase.FSDP_HOOK
    assert hooks.sum() > 100  # the main thread's pieces inside FSDP::* ranges
    as_ddp = scaled_weights(run, layout_for(t.facts, 2, "ddp"), Scenario(data_parallel="ddp"))
    as_fsdp = scaled_weights(run, layout_for(t.facts, 2), Scenario())
    assert (as_ddp[hooks] == 0).all() and as_fsdp[hooks].sum() > 1e6  # over 1 ms of FSDP's own work
    step = run.graph.phase == Phase.STEP  # the rest as it was; the optimizer's work x dp (DDP replicates it)
    assert (as_ddp[step] == as_fsdp[step]).all()
    optimizer = run.graph.phase == Phase.OPTIMIZER
    assert as_ddp[optimizer] == pytest.approx(2 * as_fsdp[optimizer] - run.graph.fixed[optimizer])


def test_a_notebook_ranks_the_runs_as_both_kinds_as_search_does(
    sample_warehouse: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    both = tracehouse.project(warehouse, study=STUDY, world_sizes=[8], other_kinds=True)
    labels = {r.label for r in both}
    assert {"ddp-ws2", "ddp-ws2 as fsdp", "fsdp-ws2", "fsdp-ws2 as ddp"} <= labels
    # tp-ws2 as fsdp: fsdp=1,tp=2, its groups of one rank; every run without tp also with tp=2
    assert sorted(both.failed) == ["pp-ws2 as fsdp"]  # a tp split is tried on runs without tp and pp
    assert {r.label for r in both} >= {"ddp-ws2 as ddp,tp=2", "ddp-ws4 as fsdp,tp=2", "fsdp-ws1 as ddp,tp=2"}
    ranking = both.ranking(8)
    assert {(c.run_id, c.layout) for c in ranking.candidates} >= {("ddp-ws2", "dp=8"), ("ddp-ws2", "fsdp=8")}
    # what a notebook shows as text: each run by its label, the ranking in one line, plain floats
    assert "ddp-ws2 as fsdp" in repr(both) and "fsdp-ws2 as ddp" in repr(both)
    best = ranking.candidates[0]
    assert repr(ranking) == (
        f"<Ranking at 8 devices: {len(ranking.candidates)} layout(s), first {best.run_id} {best.layout} "
        f"({best.tokens_per_s:,.0f} tokens/s), {len(ranking.left_out)} not ranked>"
    )
    assert {(type(c.tokens_per_s), type(c.exposed_comm_frac)) for c in ranking.candidates} == {(float, float)}
    swapped = next(r for r in both if r.label == "ddp-ws2 as fsdp")
    assert repr(swapped).startswith(f"<RunProjection {STUDY}/ddp-ws2 as fsdp: measured at 2 device(s)")
    scenarios = query(warehouse, "SELECT DISTINCT scenario FROM projections ORDER BY 1")
    assert scenarios == [
        ("as-ddp",),
        ("as-ddp+pp2",),
        ("as-ddp+pp2+1f1b",),
        ("as-ddp+tp2",),
        ("as-fsdp",),
        ("as-fsdp+tp2",),
        ("baseline",),
    ]
    with pytest.raises(TracehouseError, match="leave out run and layout"):
        tracehouse.project(warehouse, study=STUDY, run="ddp-ws2", world_sizes=[8], other_kinds=True)


def test_a_gpu_run_or_one_without_a_strategy_is_not_projected_as_the_other_kind(tmp_path: Path) -> None:
    from tracehouse.pipeline.ingest.driver import ingest

    from tests.support.testdata import shared_path

    trace = shared_path("traces/tracelens/h100_bert_small.json.gz")
    for run, facts in (("stated", {"strategy": "ddp", "n_params": 1000, "dtype": "fp32"}), ("bare", None)):
        summary = ingest([trace], tmp_path / run, study="pub", run=run, ranks={str(trace): 0}, facts=facts)
        assert summary.failed == []
    with pytest.raises(TracehouseError) as gpu:
        tracehouse.project(tmp_path / "stated", study="pub", run="stated", layout="fsdp=2")
    assert str(gpu.value) == (
        "pub/stated: a change of data-parallel kind (ddp as fsdp) is planned on CPU (gloo) ranks only, "
        "not yet on GPU ranks"
    )
    with pytest.raises(TracehouseError) as split:
        tracehouse.project(tmp_path / "stated", study="pub", run="stated", layout="dp=1,tp=2")
    assert str(split.value) == (
        "pub/stated: a change of tensor parallelism (tp=2) is planned on CPU (gloo) ranks only, not yet on "
        "GPU ranks"
    )
    with pytest.raises(TracehouseError) as bare:
        tracehouse.project(tmp_path / "bare", study="pub", run="bare", layout="fsdp=2")
    assert str(bare.value) == (
        "pub/bare: its data-parallel kind is unknown (no manifest states its strategy), so it cannot be "
        "projected as fsdp"
    )
