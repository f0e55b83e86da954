"""Merging the nodes' power captures (collectors/launch.py) and finding a node's late report at
ingest (pipeline/discovery/node_power.py); real files, no processes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from tracehouse.collectors.launch import merge_power, read_node_reports, write_node_power
from tracehouse.pipeline.common.manifest import PowerCapture, RunManifest
from tracehouse.pipeline.discovery.search import discover

SMI = "power-{host}-nvidia-smi.csv"


def capture(host: str) -> PowerCapture:
    return PowerCapture(source="nvidia-smi", files=[SMI.format(host=host)], interval_ms=100)


def test_node_zero_merges_every_report_and_names_a_silent_node(tmp_path: Path) -> None:
    write_node_power(tmp_path, 1, capture("n1"))
    write_node_power(tmp_path, 3, PowerCapture(unavailable_reason="nvml: no GPU"))
    merged = merge_power(capture("n0"), read_node_reports(tmp_path, 4, wait_s=0.0))
    assert merged.source == "nvidia-smi"
    assert merged.files == [SMI.format(host="n0"), SMI.format(host="n1")]
    assert merged.failure == (
        "node 2: no power report within 120 s (ingest adds a later one); node 3: nvml: no GPU"
    )


def test_a_report_written_after_the_manifest_is_found_at_ingest(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    manifest = RunManifest(study="s", run_id="r", nodes=2, hosts=["n0", "n1"], power=capture("n0"))
    manifest.write(run)
    (tmp_path / "outside.csv").write_text("x")
    (run / "link.csv").symlink_to(tmp_path / "outside.csv")
    for name in (SMI.format(host="n0"), SMI.format(host="n1")):
        (run / name).write_text("x")
    late = dataclasses.replace(capture("n1"), files=[SMI.format(host="n1"), "../outside.csv", "link.csv"])
    (run / "power.node1.json").write_text(json.dumps(dataclasses.asdict(late)))
    found = discover([run])
    # The late log joins the manifest's; a name leaving the folder (by path or link) does not.
    assert sorted(job.path.name for job in found.power) == [SMI.format(host="n0"), SMI.format(host="n1")]
