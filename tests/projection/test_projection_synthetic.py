"""The collectives planned for DDP and FSDP runs measured on one device match what the same
workload issues when measured on two (sample study: ddp-ws1 vs ddp-ws2, fsdp-ws1 vs fsdp-ws2), and
those planned for a run projected as the other data-parallel kind match what that kind issues
(ddp-ws2 as FSDP vs fsdp-ws2, fsdp-ws2 as DDP vs ddp-ws2)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest
from tracehouse.collectors.model_sizes import fsdp_unit_params, get_model_config, param_count
from tracehouse.pipeline.projection.build import build_run_graph
from tracehouse.pipeline.projection.project import identity_check
from tracehouse.pipeline.projection.synthetic import DDP_FIRST_BUCKET_BYTES, planned_collectives
from tracehouse.pipeline.projection.timeline import load_run, run_facts
from tracehouse.pipeline.warehouse.reading import open_reader

STUDY = "tiny-cpu-gloo"


@pytest.fixture(scope="module")
def warehouse(sample_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample warehouse, fsdp-ws2's manifest given the units the collectors now record (the
    sample manifests were written before they did: the others' come from their model_config)."""
    copy = tmp_path_factory.mktemp("synthetic") / "wh"
    shutil.copytree(sample_warehouse, copy)
    units = fsdp_unit_params(get_model_config("tiny"))
    with duckdb.connect(str(copy / "tracehouse.duckdb")) as con:
        con.execute("UPDATE run_manifests SET fsdp_units = ? WHERE run_id = 'fsdp-ws2'", [json.dumps(units)])
    return copy


def _planned(warehouse: Path, run_id: str, kind: str | None = None, rank: int = 0):
    with open_reader(warehouse) as con:
        t = load_run(con, STUDY, run_id)
    segments = list(t.cpu_compute.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows())
    steps = t.steps.filter(pl.col("rank") == rank).sort("start_ns")
    spans = t.comm.filter(pl.col("rank") == rank)
    return t, planned_collectives(t, rank, segments, steps, spans, kind)


def _per_step(planned: list) -> Counter:
    return Counter({key: n / 3 for key, n in Counter((p.op, p.bytes) for p in planned).items()})


def _measured_per_step(warehouse: Path, run_id: str) -> Counter:
    with open_reader(warehouse) as con:
        rows = con.execute(
            "SELECT op, bytes FROM comm_intervals WHERE study = ? AND run_id = ? AND rank = 0",
            [STUDY, run_id],
        ).fetchall()
    return Counter({key: n / 3 for key, n in Counter(rows).items()})  # 3 profiled steps


def test_the_units_the_collectors_record_add_up_to_the_model() -> None:
    cfg = get_model_config("tiny")
    units = fsdp_unit_params(cfg)
    assert set(units) == {"", "layers.0", "layers.1"} and sum(units.values()) == param_count(cfg)


def test_ddp_on_one_device_gets_the_gradient_buckets_ddp_issues_on_two(warehouse: Path) -> None:
    t, planned = _planned(warehouse, "ddp-ws1")
    assert {p.op for p in planned} == {"all_reduce"}
    per_step = Counter(p.key[1] for p in planned)
    assert len(per_step) == 3 and set(per_step.values()) == {2}
    first = [p for p in planned if p.key[2] == 0]
    assert all(p.bytes == DDP_FIRST_BUCKET_BYTES for p in first)
    measured = _measured_per_step(warehouse, "ddp-ws2")
    # Same bytes per step as ddp-ws2 issues (the buckets split it a little differently).
    assert sum(p.bytes for p in planned) / 3 == sum(b * n for (_, b), n in measured.items())
    backward = t.backward.filter(pl.col("rank") == 0)
    for p in planned:
        assert backward["start_ns"].min() <= p.issue_ns <= p.wait_ns
        assert p.issue_ns <= p.wait_ns


def test_fsdp_on_one_device_gets_the_all_gathers_and_reduce_scatters_fsdp_issues_on_two(
    warehouse: Path,
) -> None:
    _, planned = _planned(warehouse, "fsdp-ws1")  # its units from its manifest's model_config
    assert _per_step(planned) == _measured_per_step(warehouse, "fsdp-ws2")
    assert all(p.issue_ns <= p.wait_ns for p in planned)


@pytest.mark.parametrize("run_id", ["ddp-ws1", "fsdp-ws1"])
def test_planned_collectives_leave_the_measured_replay_unchanged(warehouse: Path, run_id: str) -> None:
    with open_reader(warehouse) as con:
        t = load_run(con, STUDY, run_id)
    run = build_run_graph(t)
    assert run.instances.members, "collectives were planned"
    assert identity_check(run, t.measured_windows()).max_error < 1e-6


def test_a_run_that_issues_data_parallel_collectives_gets_none_planned(warehouse: Path) -> None:
    for run_id in ("ddp-ws2", "fsdp-ws2", "fsdp_tp-ws4-tp2"):
        assert _planned(warehouse, run_id)[1] == []


def test_a_reference_model_config_gives_the_units_a_manifest_without_them_lacks(
    warehouse: Path, tmp_path: Path
) -> None:
    with open_reader(warehouse) as con:
        for run_id in ("ddp-ws1", "fsdp-ws1", "fsdp-ws2"):
            assert run_facts(con, STUDY, run_id).fsdp_units == fsdp_unit_params(get_model_config("tiny"))
    shutil.copytree(warehouse, tmp_path / "wh")
    with duckdb.connect(str(tmp_path / "wh" / "tracehouse.duckdb")) as con:
        con.execute("""UPDATE run_manifests SET fsdp_units = NULL, model_config = '{"name": "x"}'""")
    with open_reader(tmp_path / "wh") as con:
        assert run_facts(con, STUDY, "ddp-ws1").fsdp_units == {}  # no reference Llama: no units


@pytest.mark.parametrize("rank", [0, 1])
def test_ddp_projected_as_fsdp_plans_the_all_gathers_and_reduce_scatters_fsdp_issues(
    warehouse: Path, rank: int
) -> None:
    t, planned = _planned(warehouse, "ddp-ws2", "fsdp", rank)
    assert _per_step(planned) == _measured_per_step(warehouse, "fsdp-ws2")
    backward = t.backward.filter(pl.col("rank") == rank)
    for step in {p.key[1] for p in planned}:
        ordered = sorted((p for p in planned if p.key[1] == step), key=lambda p: p.issue_ns)
        passes = [p.key[2] for p in ordered if p.op == "all_gather"]
        assert passes == ["forward"] * 3 + ["backward"] * 2  # the root, then each block; blocks again
        units = [p.key[3] for p in ordered if p.key[2] == "forward"]
        assert units == ["", "layers.0", "layers.1"]
        assert [p.key[3] for p in ordered if p.key[2] == "backward"] == ["layers.1", "layers.0"]
        first_backward = backward.filter(pl.col("start_ns") >= ordered[0].issue_ns)["start_ns"].min()
        assert all(p.issue_ns < first_backward for p in ordered if p.key[2] == "forward")
        assert all(p.issue_ns <= p.wait_ns for p in ordered)


def test_fsdp_projected_as_ddp_plans_the_gradient_bytes_ddp_issues(warehouse: Path) -> None:
    _, planned = _planned(warehouse, "fsdp-ws2", "ddp")
    assert {p.op for p in planned} == {"all_reduce"}
    measured = _measured_per_step(warehouse, "ddp-ws2")
    assert sum(p.bytes for p in planned) / 3 == sum(b * n for (_, b), n in measured.items())


@pytest.mark.parametrize(("run_id", "kind"), [("ddp-ws2", "fsdp"), ("fsdp-ws2", "ddp")])
def test_a_change_of_kind_joins_each_planned_collective_across_ranks_and_keeps_the_replay(
    warehouse: Path, run_id: str, kind: str
) -> None:
    with open_reader(warehouse) as con:
        t = load_run(con, STUDY, run_id)
    run = build_run_graph(t, kind)
    planned = np.flatnonzero(run.planned)
    assert len(planned) > 0 and all(len(run.instances.members[i]) == 2 for i in planned)
    assert {run.instances.group_size[i] for i in planned} == {2}
    own = identity_check(build_run_graph(t), t.measured_windows())
    assert identity_check(run, t.measured_windows()) == own  # the replay of the measurement, as it was


@pytest.mark.parametrize("rank", [0, 1])
def test_fsdp_placed_at_the_layers_sits_where_fsdp_s_own_hooks_ran(warehouse: Path, rank: int) -> None:
    """fsdp-ws2 shows FSDP's hooks: its collectives placed at its layers' matmuls, as a trace without
    them gets them, lie where the hooks ran (a block's all-gathers within 1 ms after its pre-forward
    or pre-backward hook ends, before its first matmul; its reduce-scatter within 1.5 ms of its
    post-backward hook)."""
    from tracehouse.pipeline.projection.synthetic import _fsdp_by_layers, _hook_unit

    with open_reader(warehouse) as con:
        t = load_run(con, STUDY, "fsdp-ws2")
    steps = t.steps.filter(pl.col("rank") == rank).sort("start_ns")
    planned = _fsdp_by_layers(t, rank, steps, {unit: 4 * n for unit, n in t.facts.fsdp_units.items()})  # fp32
    assert planned is not None and _per_step(planned) == _measured_per_step(warehouse, "fsdp-ws2")
    hooks = t.fsdp_hooks.filter(pl.col("rank") == rank).select(["name", "start_ns", "end_ns"]).rows()
    hook_of = {
        "forward": "FSDP::pre_forward",
        "backward": "FSDP::pre_backward",
        "reduce": "FSDP::post_backward_reduce",
    }
    checked = 0
    for p in planned:
        _, step, where, unit = p.key
        if not unit:
            continue  # the root's: at the step's start and the backward's end
        lo, hi = steps.filter(pl.col("step") == step).select(["start_ns", "end_ns"]).row(0)
        ran = [(s, e) for name, s, e in hooks if _hook_unit(name) == (hook_of[where], unit) and lo <= s < hi]
        assert len(ran) == 1, (step, where, unit)
        start, end = ran[0]
        if where == "reduce":
            assert abs(p.issue_ns - start) <= 1_500_000
        else:
            assert 0 <= p.issue_ns - end <= 1_000_000
        checked += 1
    assert checked == 3 * 2 * 3  # 3 steps, 2 blocks, an all-gather forward and backward and a reduce-scatter
