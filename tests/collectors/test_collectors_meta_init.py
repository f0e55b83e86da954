"""No rank holds the full model: `medium` (1.24 GB of fp32 weights) collected under FSDP, TP and PP
at world size 2 (real torchrun, CPU, gloo), each rank's peak RSS once its part is built below
the model's full size (building the full model first, as before, puts every rank above it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tracehouse.collectors.model_sizes import MODELS, param_count
from tracehouse.collectors.spec import FACTS_NAME
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.manifest import MANIFEST_NAME, RunManifest

pytestmark = pytest.mark.slow

SWEEP = """
study = "meta-init"
model = "medium"
steps = 1
global_batch = 4
seq_len = 8
[profile]  # one step, traced: what is measured is the build, before any step
wait = 0
warmup = 0
active = 1
[[points]]
strategies = ["fsdp", "tp", "pp"]
world_sizes = [2]
"""
FULL_FP32_BYTES = 4 * param_count(MODELS["medium"])  # 1,241,714,688


def test_every_layout_builds_its_half_of_a_model_bigger_than_any_rank_ever_held(tmp_path: Path) -> None:
    assert FULL_FP32_BYTES == 1_241_714_688
    (tmp_path / "sweep.toml").write_text(SWEEP)
    out = tmp_path / "out"
    assert main(["collect", str(tmp_path / "sweep.toml"), "--out", str(out), "--timeout", "600"]) == 0
    for run_id in ("fsdp-ws2", "tp-ws2", "pp-ws2"):
        assert RunManifest.read(out / run_id / MANIFEST_NAME).status == "ok"
        built = json.loads((out / run_id / FACTS_NAME).read_text())["build_max_rss_bytes"]
        assert len(built) == 2
        # The whole process (torch itself included, ~0.33 GB) stays under the model's size.
        assert max(built) < FULL_FP32_BYTES, (run_id, built)
