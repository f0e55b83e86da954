"""The collectives planned for DDP and FSDP runs measured on one device match what the same
workload issues when measured on two (sample study: ddp-ws1 vs ddp-ws2, fsdp-ws1 vs fsdp-ws2)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import polars as pl
import pytest
from tracehouse.collectors.model_sizes import fsdp_unit_params, get_model_config, param_count
from tracehouse.pipeline.projection.build import build_run_graph
from tracehouse.pipeline.projection.project import identity_check
from tracehouse.pipeline.projection.synthetic import DDP_FIRST_BUCKET_BYTES, one_device_collectives
from tracehouse.pipeline.projection.timeline import load_run
from tracehouse.pipeline.warehouse.reading import open_reader

STUDY = "tiny-cpu-gloo"


@pytest.fixture(scope="module")
def warehouse(sample_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample warehouse with fsdp-ws1's manifest given the units the collectors now record
    (the sample manifests were written before they did)."""
    copy = tmp_path_factory.mktemp("synthetic") / "wh"
    shutil.copytree(sample_warehouse, copy)
    units = fsdp_unit_params(get_model_config("tiny"))
    with duckdb.connect(str(copy / "tracehouse.duckdb")) as con:
        con.execute("UPDATE run_manifests SET fsdp_units = ? WHERE run_id = 'fsdp-ws1'", [json.dumps(units)])
    return copy


def _planned(warehouse: Path, run_id: str):
    with open_reader(warehouse) as con:
        t = load_run(con, STUDY, run_id)
    rank = 0
    segments = list(t.cpu_compute.filter(pl.col("rank") == rank).select(["start_ns", "end_ns"]).iter_rows())
    steps = t.steps.filter(pl.col("rank") == rank).sort("start_ns")
    spans = t.comm.filter(pl.col("rank") == rank)
    return t, one_device_collectives(t, rank, segments, steps, spans)


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
    _, planned = _planned(warehouse, "fsdp-ws1")
    planned_per_step = Counter({key: n / 3 for key, n in Counter((p.op, p.bytes) for p in planned).items()})
    assert planned_per_step == _measured_per_step(warehouse, "fsdp-ws2")
    assert all(p.issue_ns <= p.wait_ns for p in planned)


@pytest.mark.parametrize("run_id", ["ddp-ws1", "fsdp-ws1"])
def test_planned_collectives_leave_the_measured_replay_unchanged(warehouse: Path, run_id: str) -> None:
    with open_reader(warehouse) as con:
        t = load_run(con, STUDY, run_id)
    run = build_run_graph(t)
    assert run.instances.members, "collectives were planned"
    assert identity_check(run, t.measured_windows()).max_error < 1e-6


def test_a_run_that_issues_data_parallel_collectives_gets_none_planned(warehouse: Path) -> None:
    for run_id in ("ddp-ws2", "fsdp-ws2", "tp-ws2", "pp-ws2"):
        assert _planned(warehouse, run_id)[1] == []
