"""Memory per device (docs/projection.md): the model state and activations of a projected layout by
hand, the device table, and the sample study projected onto devices too small for some layouts
(flagged, never ranked by --search)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.wh_helpers import query
from tracehouse.collectors.model_sizes import fsdp_unit_params, get_model_config
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.hardware import device_memory_bytes
from tracehouse.pipeline.projection.memory import memory_need, model_state
from tracehouse.pipeline.projection.timeline import RunFacts
from tracehouse.reports.charts import projection as charts_projection
from tracehouse.reports.source import open_warehouse

STUDY = "tiny-cpu-gloo"


def facts(strategy: str, *, dtype: str = "bf16", tp: int = 1, units: dict | None = None) -> RunFacts:
    return RunFacts(
        STUDY, "r", strategy, 2 * tp, 1, 8, 2, tp, 1, 4096, 8, "gpu", 1_000_000_000, dtype, units or {}, None
    )


def test_replicated_parameters_gradients_and_adamw_state_by_hand():
    # 1e9 bf16 parameters, tp=2: 5e8 per rank; 2 B each for parameters and gradients; AdamW's two
    # fp32 moments (8 B) and the fp32 master copy (4 B) of a 16-bit model
    assert model_state(facts("ddp", tp=2), 2, sharded=False) == (1e9, 1e9, 6e9)
    assert model_state(facts("ddp", dtype="fp32"), 2, sharded=False) == (4e9, 4e9, 8e9)  # no master copy
    assert model_state(facts("ddp", dtype="int3"), 2, sharded=False) is None  # unknown width: no estimate


def test_fsdp_shards_the_state_and_holds_its_largest_unit_whole():
    f = facts("fsdp", units={"": 1e8, "layers.0": 2e8, "layers.1": 2e8})
    shard = 1e9 / 8
    assert model_state(f, 8, sharded=True) == (shard * 2 + 2e8 * 2, shard * 2, shard * 12)


def test_activations_are_the_measured_peak_less_the_state_scaled_with_the_tokens():
    f = facts("ddp", dtype="fp32")  # 16e9 of state at any dp
    need = memory_need(f, dp=2, dp_new=8, sharded=False, tokens=2 / 8, peak=20e9, capacity=18e9)
    assert need.activations == pytest.approx(4e9 / 4)
    assert need.total == pytest.approx(17e9) and need.fits is True and need.flag() is None
    small = memory_need(f, dp=2, dp_new=8, sharded=False, tokens=1.0, peak=20e9, capacity=18e9)
    assert small.fits is False
    assert small.flag() == "does not fit: needs 20.0 GB per device, the device has 18.0 GB"
    unmeasured = memory_need(f, dp=2, dp_new=8, sharded=False, tokens=1.0, peak=None, capacity=10e9)
    assert unmeasured.activations is None and unmeasured.total == 16e9
    assert (
        unmeasured.flag()
        == "does not fit: needs 16.0 GB per device without activations, the device has 10.0 GB"
    )
    assert memory_need(f, dp=2, dp_new=8, sharded=False, tokens=1.0, peak=None, capacity=None).fits is None


@pytest.mark.parametrize(
    ("name", "gb"),
    [
        ("NVIDIA H100 80GB HBM3", 80),
        ("NVIDIA A100-SXM4-40GB", 40),
        ("NVIDIA A100-SXM4-80GB", 80),
        ("Tesla V100-SXM2-32GB", 32),
        ("AMD Instinct MI300X", 192),
        ("NVIDIA H200", 141),
        ("Intel(R) Xeon(R) Processor", None),
    ],
)
def test_device_memory_from_the_device_name(name, gb):
    assert device_memory_bytes(name) == (None if gb is None else gb * 1e9)


def test_layouts_that_do_not_fit_are_flagged_and_never_ranked(sample_warehouse: Path, tmp_path: Path, capsys):
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    args = ["project", "--warehouse", str(warehouse), "--study", STUDY, "--search", "--devices", "8"]
    capsys.readouterr()
    assert main([*args, "--device-memory", "0.005", "--json"]) == 0  # 5 MB devices
    shown = json.loads(capsys.readouterr().out)
    rows = query(
        warehouse,
        "SELECT p.run_id, p.layout, p.memory_bytes, p.memory_capacity_bytes, p.flag, r.n_params, r.strategy "
        "FROM projections p JOIN runs r USING (study, run_id) WHERE p.world_size = 8 ORDER BY 1, 2",
    )
    assert {layout.split("=")[0] for _, layout, *_ in rows} == {"dp", "fsdp"}  # each run as both kinds
    labels = {}
    for run, layout, need, capacity, flag, n_params, strategy in rows:
        assert capacity == 5e6
        # fp32 parameters and gradients and AdamW's two moments: 16 B a parameter, split by tp and,
        # as FSDP (fsdp=N), sharded over the N data-parallel ranks, which also hold the largest unit
        # whole while it computes (the root: embedding, norm, output), whatever the run measured
        tp = 2 if "tp=2" in layout else 1
        pp = 2 if "pp=2" in layout else 1  # a stage holds half the layers' parameters
        sharded = layout.startswith("fsdp=")
        largest = max(fsdp_unit_params(get_model_config("tiny")).values())
        whole_unit = 4 * largest // tp if sharded else 0
        expected = 16 * n_params / tp / pp / (8 // tp if sharded else 1) + whole_unit
        assert need == pytest.approx(expected), (run, layout)
        assert (flag is not None and flag.startswith("does not fit: needs")) == (need > 5e6), (run, layout)
        own = sharded == strategy.startswith("fsdp")
        kind = "fsdp" if sharded else "ddp"
        split = tp == 2 and strategy not in ("tp", "fsdp_tp")  # tp added to a run without it
        piped = pp == 2 and strategy != "pp"  # a pipeline made of a run without one
        labels[(run, layout)] = (
            f"{run} as {kind},tp=2"
            if split
            else f"{run} as ddp,pp=2" + (",schedule=1f1b" if layout.endswith("schedule=1f1b") else "")
            if piped
            else run
            if own
            else f"{run} as {kind}"
        )
    (search,) = shown["search"]
    ranked = {(c["run_id"], c["layout"]) for c in search["candidates"]}
    assert ranked == {(run, layout) for run, layout, need, *_ in rows if need <= 5e6} and ranked
    too_big = [labels[(run, layout)] for run, layout, need, *_ in rows if need > 5e6]
    assert too_big and all("does not fit" in search["left_out"][label] for label in too_big)
    assert search["memory"].startswith("memory fit unchecked") is False
    con = open_warehouse(warehouse)
    try:
        sentence = charts_projection.ranking_sentence(con, STUDY)
    finally:
        con.close()
    unfit = sorted(label for label in too_big if " as " not in label)  # the sentence's scenario: as measured
    assert sentence.endswith(f" Not ranked, too large for the device's memory: {', '.join(unfit)}.")
    text = json.loads(
        query(warehouse, "SELECT provenance FROM projections WHERE run_id = 'ddp-ws2' LIMIT 1")[0][0]
    )
    assert text["memory"] == {
        "measured_peak_bytes": None,
        "activations": "not measured (a lower bound)",
        "capacity_bytes": 5e6,
        "capacity_source": "stated",
    }
