"""`tracehouse project --search`: the study's measured layouts ranked at a world size, on hand-made
projections (order, bands, tokens per joule, what is left out and why) and on the sample study."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.wh_helpers import query
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.projection.results import IdentityCheck, ProjectedPoint, Projections, RunProjection
from tracehouse.pipeline.projection.search import rank_layouts
from tracehouse.pipeline.projection.timeline import RunFacts

STUDY = "tiny-cpu-gloo"


def facts(run: str, strategy: str, tp: int = 1, pp: int = 1) -> RunFacts:
    return RunFacts(STUDY, run, strategy, 2 * tp * pp, 1, 8, 2, tp, pp, 4096, 8, "gpu", 1_000_000, "bf16", {})


def point(
    run: str,
    world_size: int,
    step_us: float,
    factor: float,
    *,
    flag: str | None = None,
    layout: str = "dp=64",
) -> ProjectedPoint:
    tokens = 4096 / (step_us / 1e6)
    return ProjectedPoint(
        study=STUDY,
        run_id=run,
        scenario="baseline",
        assumptions="",
        notes=None,
        world_size=world_size,
        layout=layout,
        measured_world_size=2,
        step_time_us=step_us,
        measured_step_time_us=None,
        measured_run_id=None,
        measured_tokens_per_s_per_device=None,
        tokens_per_s=tokens,
        tokens_per_s_per_device=tokens / world_size,
        scaling_efficiency=None,
        marginal_tokens_per_s_per_device=None,
        knee=False,
        knee_note="",
        flag=flag,
        compute_frac=0.5,
        exposed_comm_frac=0.25,
        other_frac=0.0,
        idle_frac=0.25,
        exposed_comm_dp_frac=0.25,
        exposed_comm_tp_frac=0.0,
        exposed_comm_pp_frac=0.0,
        exposed_comm_other_frac=0.0,
        step_time_low_us=step_us / factor,
        step_time_high_us=step_us * factor,
    )


def run(f: RunFacts, points: list[ProjectedPoint], refused: dict[int, str] | None = None) -> RunProjection:
    return RunProjection(f, IdentityCheck({}), points, refused=refused or {})


def test_layouts_rank_by_projected_tokens_per_s_with_their_band_and_tokens_per_joule():
    projections = Projections(
        [
            run(facts("ddp", "ddp"), [point("ddp", 64, 200_000.0, 2.0)]),
            run(facts("tp", "fsdp_tp", tp=2), [point("tp", 64, 100_000.0, 1.5, layout="fsdp=32,tp=2")]),
            run(facts("pp", "pp", pp=4), [point("pp", 64, 400_000.0, 1.0, flag="too few sequences")]),
            run(facts("one", "tp", tp=2), [], refused={64: "no collective to scale"}),
        ],
        failed={"broken": "cannot be read"},
    )
    ranking = rank_layouts(projections, 64, {"tp": 500.0})
    assert [(c.run_id, c.layout) for c in ranking.candidates] == [
        ("tp", "fsdp=32,tp=2"),
        ("ddp", "dp=64"),
    ]
    best, second = ranking.candidates
    assert best.tokens_per_s == pytest.approx(40_960.0)  # 4,096 tokens in 0.1 s
    assert best.tokens_per_s_low == pytest.approx(40_960 / 1.5)
    assert best.tokens_per_s_high == pytest.approx(40_960 * 1.5)
    assert best.tokens_per_j == pytest.approx(40_960 / (500.0 * 64))  # each device at its measured power
    assert second.tokens_per_j is None and ranking.most_tokens_per_j is best
    assert ranking.left_out == {
        "broken": "not projected: cannot be read",
        "one": "not projected at 64: no collective to scale",
        "pp": "no runnable configuration: too few sequences",
    }
    projections.power_w = {"tp": 500.0}
    assert projections.ranking(64) == ranking  # what a notebook calls
    assert ranking.pl()["run_id"].to_list() == ["tp", "ddp"] and "Not ranked" in ranking._repr_html_()
    assert ranking.to_dict()["memory"].startswith("memory fit unchecked for tp, ddp: the device's memory")


def test_the_sample_study_searched_at_two_world_sizes(sample_warehouse: Path, tmp_path: Path, capsys):
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    args = ["project", "--warehouse", str(warehouse), "--study", STUDY, "--search", "--devices", "512,2048"]
    capsys.readouterr()
    assert main([*args, "--weak-scaling", "--network", "dgx-h100", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    stored = query(
        warehouse,
        "SELECT world_size, run_id, tokens_per_s FROM projections "
        "WHERE world_size IN (512, 2048) AND flag IS NULL AND tokens_per_s > 0 "
        "ORDER BY world_size, tokens_per_s DESC, run_id",
    )
    ranked = [
        (s["world_size"], c["run_id"], pytest.approx(c["tokens_per_s"]))
        for s in shown["search"]
        for c in s["candidates"]
    ]
    assert ranked == stored
    for s in shown["search"]:
        # each run but the pipeline's as measured and as the other data-parallel kind
        layouts = {
            (c["run_id"], c["layout"].split("=")[0]) for c in s["candidates"] if ",pp=" not in c["layout"]
        }
        runs = ["ddp-ws1", "ddp-ws2", "ddp-ws4", "fsdp-ws1", "fsdp-ws2", "fsdp-ws4", "fsdp_tp-ws4-tp2"]
        runs.append("tp-ws2")
        assert layouts == {(run, kind) for run in runs for kind in ("dp", "fsdp")}
        assert set(s["left_out"]) == {"pp-ws2 as fsdp"}
        # and each run without tensor parallelism split over 2 ranks, as each kind
        split = {(c["run_id"], c["layout"]) for c in s["candidates"] if c["layout"].endswith(",tp=2")}
        n = s["world_size"] // 2
        assert split >= {(run, f"{kind}={n},tp=2") for run in runs[:6] for kind in ("dp", "fsdp")}
        # and as a pipeline of 2 stages (the tiny model's 2 layers allow no more) over DDP replicas, in
        # GPipe's order and in 1F1B's
        piped = {(c["run_id"], c["layout"]) for c in s["candidates"] if ",pp=" in c["layout"]}
        # tracehouse collect's micro-batches: 2 per stage where the sequences a replica measured divide
        # (8 on one replica, 4 on each of 2), else the sequences themselves (2 on each of 4)
        micro = {run: 2 if run.endswith("ws4") else 4 for run in runs[:6]}
        pipelines = {
            (run, f"dp={n},pp=2,microbatches={m}{o}")
            for run, m in micro.items()
            for o in ("", ",schedule=1f1b")
        }
        assert piped == pipelines | {("pp-ws2", f"dp={n},pp=2")}
        assert all(why.startswith("not projected") for why in s["left_out"].values())
        assert "parameters per stage are unknown" in s["left_out"]["pp-ws2 as fsdp"]
    assert [r["run_id"] for r in shown["projections"]] == sorted(r["run_id"] for r in shown["projections"])
    assert main([*args, "--weak-scaling", "--network", "dgx-h100", "--scenario", "searched"]) == 0
    lines = capsys.readouterr().out.splitlines()
    heads = [line for line in lines if line.startswith("search at")]
    # every layout printed whole, the longest (a 1F1B pipeline's) too
    assert any(" dp=256,pp=2,microbatches=4,schedule=1f1b " in line for line in lines)
    assert heads == [
        f"search at {n} devices ({STUDY}, searched): {len(r['candidates'])} layout(s) ranked by "
        "projected tokens/s"
        for n, r in zip(("512", "2,048"), shown["search"], strict=True)
    ]
    assert main([*args, "--run", "ddp-ws1"]) == 2
    assert capsys.readouterr().err.strip().endswith("--search ranks every run of the study: leave out --run")
