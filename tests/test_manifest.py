"""The run manifest: what a hand-written one needs, and the checks on what it states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.testdata import REPO
from tracehouse.pipeline.common.errors import ManifestError
from tracehouse.pipeline.common.manifest import INT32_FIELDS, RunManifest

MISSING = object()  # a field left out of the manifest


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


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"study": MISSING}, "study is required"),
        ({"study": 3, "run_id": MISSING}, "run_id is required"),
        ({"study": "", "run_id": "r"}, "study must be a non-empty string"),
        ({"study": 3, "run_id": "r"}, "study must be a string, got 3"),
        ({"world_size": "eight"}, "world_size must be an integer or null, got 'eight'"),
        ({"world_size": True}, "world_size must be an integer or null, got True"),
        ({"world_size": 2.0}, "world_size must be an integer or null, got 2.0"),
        ({"world_size": 0}, "world_size must be positive, got 0"),
        ({"world_size": 2**31}, "world_size must be below 2147483648, got 2147483648"),
        ({"n_params": 2**50}, "n_params must be below 1125899906842624, got 1125899906842624"),
        ({"peak_flops": "fast"}, "peak_flops must be a number or null, got 'fast'"),
        ({"hosts": "node1"}, "hosts must be a list of strings, got 'node1'"),
        ({"command": ["python", 3]}, "command must be a list of strings, got ['python', 3]"),
        ({"model_config": []}, "model_config must be an object, got []"),
        ({"traces": ["t.json"]}, "traces must be an object of strings, got ['t.json']"),
        ({"traces": {"x": "t.json"}}, "traces key 'x' is not a rank number"),
        (
            {"traces": {"0": "sub/t.json"}},
            "traces['0'] must be a file name beside manifest.json, got 'sub/t.json'",
        ),
        ({"traces": {"0": ".."}}, "traces['0'] must be a file name beside manifest.json, got '..'"),
        ({"world_size": 2, "traces": {"2": "t.json"}}, "traces rank 2 is not below world_size 2"),
        ({"power": "nvml"}, "power must be an object, got 'nvml'"),
        ({"power": {"files": "p.csv"}}, "power.files must be a list of strings, got 'p.csv'"),
        ({"status": "done"}, "status must be 'ok' or 'failed', got 'done'"),
        ({"tokens_per_stp": 4096}, "unknown field tokens_per_stp (did you mean tokens_per_step?)"),
        ({"power": {"filez": []}}, "unknown field power.filez (did you mean power.files?)"),
        ({"colour": "blue"}, "unknown field colour (manifest_version 1 has no such field)"),
    ],
)
def test_a_bad_field_is_one_line_naming_the_file_and_the_field(tmp_path, fields, message):
    path = tmp_path / "manifest.json"
    data = {"study": "s", "run_id": "r", **fields}
    path.write_text(json.dumps({key: value for key, value in data.items() if value is not MISSING}))
    with pytest.raises(ManifestError) as caught:
        RunManifest.read(path)
    assert str(caught.value) == f"{path}: {message}"


def test_a_long_bad_value_is_shortened(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"study": "s", "run_id": "r", "model": ["x" * 500]}))
    with pytest.raises(ManifestError, match=r"model must be a string or null, got \['xxx") as caught:
        RunManifest.read(path)
    assert len(str(caught.value)) < len(str(path)) + 120 and "\n" not in str(caught.value)


def test_a_newer_manifest_version_may_add_fields(tmp_path):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"study": "s", "run_id": "r", "manifest_version": 2, "colour": "blue"}))
    assert RunManifest.read(path).run_id == "r"


def test_the_collectors_manifest_of_every_sample_run_is_valid():
    paths = sorted((Path(__file__).parents[1] / "sample_traces").rglob("manifest.json"))
    assert paths and all(RunManifest.read(p).status == "ok" for p in paths)


def test_the_integer_fields_are_the_integer_columns_of_run_manifests():
    sql = (REPO / "sql" / "raw" / "run_manifests.sql").read_text()
    # a column of the CREATE TABLE, or one added later by ALTER TABLE ... ADD COLUMN IF NOT EXISTS
    column = r"^(?:\s+|ALTER TABLE \w+ ADD COLUMN IF NOT EXISTS )(\w+) INTEGER\b"
    integer_columns = set(re.findall(column, sql, flags=re.MULTILINE))
    assert integer_columns == INT32_FIELDS
