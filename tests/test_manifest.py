"""The run manifest: what a hand-written one needs, and the checks on what it states."""

from __future__ import annotations

import json

import pytest
from tracehouse.pipeline.errors import ManifestError
from tracehouse.pipeline.manifest import RunManifest


def test_a_hand_written_manifest_needs_no_parallel_degrees(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(
        json.dumps({"study": "s", "run_id": "r", "world_size": 2, "global_batch": 8, "seq_len": 64})
    )
    manifest = RunManifest.read(path)
    assert (manifest.dp, manifest.tp, manifest.pp, manifest.nodes) == (None, None, None, None)
    assert manifest.tokens_per_step == 512


def test_stated_degrees_must_multiply_to_the_world_size(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"study": "s", "run_id": "r", "world_size": 8, "tp": 2, "dp": 2}))
    with pytest.raises(ManifestError, match=r"dp\*tp\*pp = 2\*2\*1 does not equal world_size 8"):
        RunManifest.read(path)


def test_round_trip(tmp_path):
    written = RunManifest(study="s", run_id="r", world_size=4, dp=2, tp=2, traces={"0": "rank0.json"})
    assert RunManifest.read(written.write(tmp_path)) == written
