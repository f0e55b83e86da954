"""Pipelines of 1, 3 and 4 stages of the `small` model (4 layers) as real torchrun jobs (CPU, gloo).

A middle stage has no loss and the single stage of pp = 1 is both first and last; every depth
trains the same model on the same batch, so its per-step loss equals the single-rank DDP loss.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tracehouse.collectors.spec import LOSS_NAME, trace_name
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.manifest import MANIFEST_NAME, RunManifest

pytestmark = pytest.mark.slow

# global_batch 24 splits into the 2 x pp microbatches of every depth (2, 6, 8).
SWEEP = """
study = "pp-depth"
model = "small"
steps = 3
global_batch = 24
seq_len = 32
[profile]
active = 1
[[points]]
strategies = ["ddp", "pp"]
world_sizes = [1]
[[points]]
strategies = ["pp"]
world_sizes = [3, 4]
"""
LOSS_ATOL = 1e-4  # fp32: only the summation order differs


def losses(run_dir: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run_dir / LOSS_NAME).read_text().splitlines()]


def test_pipelines_of_one_three_and_four_stages_collect_and_match_one_rank(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SWEEP)
    out = tmp_path / "out"
    assert main(["collect", str(sweep), "--out", str(out)]) == 0
    reference = losses(out / "ddp-ws1")
    assert len(reference) == 3
    for run_id, pp in (("pp-ws1", 1), ("pp-ws3", 3), ("pp-ws4", 4)):
        manifest = RunManifest.read(out / run_id / MANIFEST_NAME)
        assert (manifest.status, manifest.pp, manifest.world_size) == ("ok", pp, pp)
        assert all((out / run_id / trace_name(rank)).is_file() for rank in range(pp))
        assert losses(out / run_id) == pytest.approx(reference, abs=LOSS_ATOL)
