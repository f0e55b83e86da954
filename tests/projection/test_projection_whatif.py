"""The what-ifs of what collectives move: gradient compression and lower-precision communication
(docs/projection.md, Scenarios), instance by instance on the sample runs and through the command."""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

import duckdb
import numpy as np
import pytest
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.critical_rows import built_run
from tracehouse.pipeline.projection.network import Link, NetworkModel
from tracehouse.pipeline.projection.scenario import Scenario, instance_transfers, is_data_parallel, layout_for
from tracehouse.pipeline.warehouse.reading import open_reader

STUDY = "tiny-cpu-gloo"
# Pure bandwidth (no latency): a transfer is proportional to its bytes.
LINEAR = NetworkModel(devices_per_node=8, links={("*", "intra_node"): Link(busbw_gbps=10.0, latency_us=0.0)})


@cache
def _built(warehouse: Path, run_id: str) -> tuple:
    with open_reader(warehouse) as con:
        return built_run(con, STUDY, run_id)


def _ratios(warehouse: Path, run_id: str, scenario: Scenario) -> list[tuple[str, bool, str | None, float]]:
    """Per instance: op, data-parallel, dtype, transfer under the scenario / the baseline's."""
    timeline, run = _built(warehouse, run_id)
    layout = layout_for(timeline.facts, timeline.facts.world_size)
    base = instance_transfers(run, layout, Scenario(), LINEAR, {}).ns
    changed = instance_transfers(run, layout, scenario, LINEAR, {}).ns
    inst = run.instances
    return [
        (inst.op[i], is_data_parallel(inst.dim[i], layout), inst.dtype[i], changed[i] / base[i])
        for i in range(len(inst.members))
        if base[i] > 0
    ]


@pytest.mark.parametrize("run_id", ["fsdp-ws2", "ddp-ws2", "tp-ws2"])
def test_gradient_compression_shrinks_the_gradient_reductions_only(
    sample_warehouse: Path, run_id: str
) -> None:
    rows = _ratios(sample_warehouse, run_id, Scenario(grad_compression=4))
    gradients = [r for op, dp, _, r in rows if dp and op in ("all_reduce", "reduce_scatter")]
    others = [r for op, dp, _, r in rows if not (dp and op in ("all_reduce", "reduce_scatter"))]
    assert gradients or run_id == "tp-ws2"
    assert gradients == pytest.approx([0.25] * len(gradients))
    assert others == pytest.approx([1.0] * len(others))  # all-gathers of parameters; tp activations
    if run_id == "fsdp-ws2":
        assert any(op == "all_gather" for op, *_ in rows) and others


@pytest.mark.parametrize(("dtype", "ratio"), [("bf16", 0.5), ("fp16", 0.5), ("fp8", 0.25), ("fp32", 1.0)])
def test_lower_precision_collectives_move_bytes_by_element_size(
    sample_warehouse: Path, dtype: str, ratio: float
) -> None:
    for run_id in ("ddp-ws2", "fsdp-ws2", "pp-ws2", "tp-ws2"):
        rows = _ratios(sample_warehouse, run_id, Scenario(comm_dtype=dtype))
        assert {d for _, _, d, _ in rows} == {"float32"}  # what the sample runs moved
        assert [r for *_, r in rows] == pytest.approx([ratio] * len(rows)), run_id


def test_a_planned_collective_moves_the_manifests_element_type(sample_warehouse: Path) -> None:
    """ddp-ws1 issues no all-reduce: the planned buckets carry the manifest's dtype (fp32)."""
    timeline, run = _built(sample_warehouse, "ddp-ws1")
    layout = layout_for(timeline.facts, 2)
    assert set(run.instances.dtype) == {"float32"}
    base = instance_transfers(run, layout, Scenario(), LINEAR, {}).ns
    half = instance_transfers(run, layout, Scenario(comm_dtype="bf16", grad_compression=2), LINEAR, {}).ns
    assert np.all(base > 0) and half / base == pytest.approx(np.full(len(base), 0.25))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"grad_compression": 0}, "grad-compression must be > 0"),
        ({"comm_dtype": "int3"}, "comm-dtype 'int3' is no element type tracehouse knows"),
    ],
)
def test_impossible_what_ifs_are_refused(changes: dict, message: str) -> None:
    with pytest.raises(TracehouseError, match=message):
        Scenario(**changes)


def test_the_command_names_and_states_the_what_if(sample_warehouse: Path, tmp_path: Path, capsys) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    args = [
        "project",
        "--warehouse",
        str(warehouse),
        "--study",
        STUDY,
        "--run",
        "ddp-ws2",
        "--world-sizes",
        "8",
    ]
    assert main(args) == 0
    assert main([*args, "--grad-compression", "8", "--comm-dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "gradient reductions compressed x8" in out and "collectives in bfloat16" in out
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as con:
        steps = dict(
            con.execute("SELECT scenario, step_time_us FROM projections WHERE world_size = 8").fetchall()
        )
    assert set(steps) == {"baseline", "grad-compression-x8+comm-bf16"}
    assert steps["grad-compression-x8+comm-bf16"] < steps["baseline"], steps  # 29.0 against 29.8 ms
    assert main([*args, "--comm-dtype", "int3"]) == 2
    assert "invalid scenario: comm-dtype 'int3'" in capsys.readouterr().err
