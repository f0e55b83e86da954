"""A node's capacity (manifest node_devices) is recorded apart from the devices a run used on it
(devices_per_node), and projection places ranks by capacity; older manifests fall back to the
devices used, and the projection's notes say so."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.testdata import SAMPLE_TRACES
from tracehouse.collectors.run_manifest import build_manifest
from tracehouse.collectors.spec import RunSpec
from tracehouse.pipeline.common.manifest import PowerCapture
from tracehouse.pipeline.projection.project import node_size, project_study
from tracehouse.pipeline.projection.results import Projections
from tracehouse.pipeline.projection.scenario import Scenario
from tracehouse.pipeline.warehouse.reading import open_reader


def test_the_collector_records_the_nodes_cpus_beside_the_devices_it_used(tmp_path: Path) -> None:
    spec = RunSpec(study="s", model="tiny", strategy="ddp", world_size=2, steps=8, global_batch=2, seq_len=16)
    manifest = build_manifest(
        spec,
        tmp_path,
        power=PowerCapture(unavailable_reason="cpu"),
        started_at="2026-12-06T00:00:00Z",
        ended_at="2026-12-06T00:00:01Z",
        command=["torchrun"],
        failure="none ran",
    )
    assert manifest.devices_per_node == 2
    assert manifest.node_devices == len(os.sched_getaffinity(0))  # gloo on CPU: this process's CPUs


def _ingested(tmp_path: Path, node_devices: int | None) -> Path:
    """The sample ddp-ws2 and ddp-ws4 runs (one host; their all-reduces at 2 and 4 ranks fit the
    network) with node_devices stated or left out."""
    from tracehouse.pipeline.ingest.driver import ingest

    runs = []
    for name in ("ddp-ws2", "ddp-ws4"):
        source = SAMPLE_TRACES / "tiny-cpu-gloo" / name
        if not source.is_dir():
            pytest.skip(f"sample_traces/ holds no {name} run")
        run = tmp_path / "traces" / name
        shutil.copytree(source, run)
        manifest = json.loads((run / "manifest.json").read_text())
        manifest.pop("node_devices", None)
        if node_devices is not None:
            manifest["node_devices"] = node_devices
        (run / "manifest.json").write_text(json.dumps(manifest))
        runs.append(run)
    warehouse = tmp_path / "warehouse"
    assert ingest(runs, warehouse).failed == []
    return warehouse


def _project_to_8(warehouse: Path) -> Projections:
    """ddp-ws2 projected to 8 devices on its calibrated network."""
    return project_study(
        warehouse,
        study="tiny-cpu-gloo",
        run_id="ddp-ws2",
        world_sizes=[8],
        scenario=Scenario(),
        scenario_name="baseline",
    )


def test_projection_places_ranks_by_the_nodes_capacity(tmp_path: Path) -> None:
    warehouse = _ingested(tmp_path, node_devices=8)
    with open_reader(warehouse) as con:
        assert con.execute("SELECT devices_per_node, node_devices FROM runs ORDER BY 1").fetchall() == [
            (2, 8),
            (4, 8),
        ]
        assert node_size(con, "tiny-cpu-gloo") == (8, None)
    projected = _project_to_8(warehouse)
    point = projected[0].points[-1]
    assert "8 devices per node" in point.assumptions and point.notes is None


def test_an_old_manifest_falls_back_to_the_devices_used_and_says_so(tmp_path: Path) -> None:
    warehouse = _ingested(tmp_path, node_devices=None)
    with open_reader(warehouse) as con:
        per_node, note = node_size(con, "tiny-cpu-gloo")
    assert per_node == 4  # the most devices a run used on one node
    assert note.startswith("nodes assumed to hold 4 devices: the study's manifests record no node_devices")
    projected = _project_to_8(warehouse)
    assert all(note in p.notes for p in projected[0].points)
    assert projected[0].notes[-1] == note
