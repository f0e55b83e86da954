"""Real torchrun jobs of the tiny model (CPU, gloo), shared by every test in this module.

One sweep runs ddp at 1 and 2 ranks, fsdp, tp and pp at 2 ranks (about 70 s on 2 cores); the
tests read its traces with gzip/json and through the project's own Kineto parser.
Loss tolerance: every layout's per-step loss equals the single-rank loss within 1e-4
absolute (fp32; differences come only from summation order, ~1e-6 seen).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from tracehouse.collectors.spec import LOSS_NAME, trace_name
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.comm_label import parse_label
from tracehouse.pipeline.common.manifest import RunManifest

pytestmark = pytest.mark.slow

SWEEP = """
study = "e2e"
model = "tiny"
steps = 5
global_batch = 8
seq_len = 32
[[points]]
strategies = ["ddp"]
world_sizes = [1, 2]
[[points]]
strategies = ["fsdp", "tp", "pp"]
world_sizes = [2]
"""
RUNS = ["ddp-ws1", "ddp-ws2", "fsdp-ws2", "tp-ws2", "pp-ws2"]
LOSS_ATOL = 1e-4


@pytest.fixture(scope="module")
def sweep_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("collect")
    (root / "sweep.toml").write_text(SWEEP)
    status = main(["collect", str(root / "sweep.toml"), "--out", str(root / "out"), "--timeout", "300"])
    assert status == 0, [(p.name, (p / "train.log").read_text()[-2000:]) for p in (root / "out").iterdir()]
    return root / "out"


def load_trace(path: Path) -> dict:
    with gzip.open(path) as handle:
        return json.load(handle)


def labels(trace: dict) -> list[dict[str, str]]:
    events = sorted((e for e in trace["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"])
    return [lab for e in events if (lab := parse_label(e["name"]))]


def losses(run_dir: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run_dir / LOSS_NAME).read_text().splitlines()]


@pytest.mark.parametrize("run_id", RUNS)
def test_one_trace_per_rank_with_the_active_steps(sweep_out: Path, run_id: str) -> None:
    world = int(run_id.split("ws")[1])
    for rank in range(world):
        trace = load_trace(sweep_out / run_id / trace_name(rank))
        steps = sorted(e["name"] for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#"))
        assert steps == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
        assert trace["distributedInfo"]["rank"] == rank and trace["distributedInfo"]["backend"] == "gloo"


@pytest.mark.parametrize("run_id", RUNS)
def test_manifest_is_complete(sweep_out: Path, run_id: str) -> None:
    m = RunManifest.read(sweep_out / run_id / "manifest.json")
    world = int(run_id.split("ws")[1])
    assert (m.study, m.run_id, m.status, m.failure) == ("e2e", run_id, "ok", None)
    assert (m.model, m.n_params, m.flops_per_token) == ("tiny", 631_424, 6 * 631_424 + 12 * 2 * 128 * 32)
    assert (m.global_batch, m.seq_len, m.tokens_per_step, m.world_size) == (8, 32, 256, world)
    assert m.dp * m.tp * m.pp == world and m.strategy == run_id.split("-")[0]
    assert (m.device_type, m.dtype, m.peak_flops, m.nodes, m.devices_per_node) == (
        "cpu",
        "fp32",
        None,
        1,
        world,
    )
    assert m.traces == {str(r): trace_name(r) for r in range(world)}
    assert m.model_config["n_kv_heads"] == 2 and m.torch_version and m.hosts and m.started_at < m.ended_at
    assert "torch.distributed.run" in m.command and "--nproc_per_node" in m.command
    assert m.power.source is not None or m.power.unavailable_reason


@pytest.mark.parametrize("run_id", RUNS[1:])
def test_layouts_reach_the_single_rank_loss(sweep_out: Path, run_id: str) -> None:
    reference = losses(sweep_out / "ddp-ws1")
    assert len(reference) == 5 and reference[-1] < reference[0]  # it learns
    assert losses(sweep_out / run_id) == pytest.approx(reference, abs=LOSS_ATOL)


@pytest.mark.parametrize(
    ("run_id", "expected_ops"),
    [
        ("ddp-ws2", {"all_reduce"}),
        ("fsdp-ws2", {"all_gather", "reduce_scatter"}),
        ("tp-ws2", {"all_reduce", "all_gather"}),
        ("pp-ws2", {"send", "recv"}),
    ],
)
def test_collectives_are_labelled_with_size_and_group(
    sweep_out: Path, run_id: str, expected_ops: set
) -> None:
    per_rank = []
    for rank in range(2):
        trace = load_trace(sweep_out / run_id / trace_name(rank))
        pg = {c["pg_name"]: c for c in trace["distributedInfo"]["pg_config"]}
        found = labels(trace)
        assert {lab["op"] for lab in found} == expected_ops
        for lab in found:
            assert lab["pg"] in pg and int(lab["group_size"]) == pg[lab["pg"]]["pg_size"] == 2
            assert int(lab["bytes"]) > 0 and lab["dtype"] == "float32"
        seqs = [int(lab["seq"]) for lab in found]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # one group: consecutive
        gloo = Counter(e["name"] for e in trace["traceEvents"] if e["name"].startswith("gloo:"))
        assert sum(gloo.values()) == len(found)  # every transfer has its label
        per_rank.append(found)
    if run_id == "pp-ws2":  # rank 0's k-th send is rank 1's k-th recv, and back
        swap = {"send": "recv", "recv": "send"}
        assert [(lab["seq"], swap[lab["op"]], lab["bytes"]) for lab in per_rank[0]] == [
            (lab["seq"], lab["op"], lab["bytes"]) for lab in per_rank[1]
        ]
    else:  # collectives: identical on both ranks
        assert per_rank[0] == per_rank[1]


def test_ddp_bucket_sizes_add_up_to_the_model(sweep_out: Path) -> None:
    found = labels(load_trace(sweep_out / "ddp-ws2" / trace_name(0)))
    per_step = sum(int(lab["bytes"]) for lab in found) / 3
    assert per_step == 631_424 * 4  # every fp32 gradient all-reduced once per step


def test_the_project_parser_attributes_every_gloo_span(sweep_out: Path) -> None:
    parse_trace = pytest.importorskip("tracehouse.pipeline.parsers.kineto.parse").parse_trace
    for run_id in RUNS[1:]:
        parsed = parse_trace(sweep_out / run_id / trace_name(1))
        rows = parsed.collectives
        assert rows.height > 0 and set(rows["source"]) == {"gloo"}, run_id
        assert rows["process_group"].null_count() == 0 and rows["seq"].null_count() == 0
        assert parsed.steps["step"].to_list() == [2, 3, 4]


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SWEEP.split("[[points]]")[0] + 'strategies = ["ddp"]\nworld_sizes = [1, 2]\n')
    # 1 s is too short for torchrun to even import torch: both points fail, both are recorded.
    assert main(["collect", str(sweep), "--out", str(tmp_path / "o"), "--timeout", "1"]) == 1
    for run_id in ("ddp-ws1", "ddp-ws2"):
        m = RunManifest.read(tmp_path / "o" / run_id / "manifest.json")
        assert m.status == "failed" and "timed out" in m.failure and "train.log" in m.failure
        assert m.traces == {} and (tmp_path / "o" / run_id / "train.log").exists()
