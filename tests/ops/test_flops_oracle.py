"""The FLOPs derived from a trace's op shapes equal FlopCounterMode's for the same workload.

The reference workload (the collectors' Llama, forward + backward + AdamW step on CPU) runs once
under FlopCounterMode and once under torch.profiler with record_shapes; per aten op, the trace's
FLOPs (counted once, at the innermost op with a formula) must equal FlopCounterMode's exactly.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

torch = pytest.importorskip("torch")

from support.host_ops import host_ops  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from tracehouse.collectors.llama import Llama, cross_entropy, synthetic_batch  # noqa: E402
from tracehouse.collectors.model_sizes import get_model_config  # noqa: E402
from tracehouse.pipeline.ops.costs import innermost_flops, op_costs  # noqa: E402


def _train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, cfg, step: int) -> None:
    inputs, targets = synthetic_batch(cfg, global_batch=4, seq_len=64, step=step, seed=0)
    loss = cross_entropy(model(inputs), targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@pytest.fixture(scope="module", params=["tiny", "small"])
def both_counts(request, tmp_path_factory) -> tuple[dict[str, int], pl.DataFrame]:
    """FlopCounterMode's per-op FLOPs and the trace's counted FLOPs per op for one training step."""
    torch.manual_seed(0)
    cfg = get_model_config(request.param)
    model = Llama(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    _train_step(model, optimizer, cfg, 0)  # the optimizer's state exists from here on
    with FlopCounterMode(display=False) as counter:
        _train_step(model, optimizer, cfg, 1)
    counted = {f"aten::{op.__name__}": n for op, n in counter.get_flop_counts()["Global"].items()}
    trace = tmp_path_factory.mktemp("oracle") / "trace.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        _train_step(model, optimizer, cfg, 2)
    prof.export_chrome_trace(str(trace))
    calls = innermost_flops(op_costs(host_ops(Path(trace))))
    return counted, calls


def test_trace_flops_equal_flop_counter_per_op(both_counts) -> None:
    counted, calls = both_counts
    derived = dict(
        calls.filter(pl.col("name").is_in(list(counted)))
        .group_by("name")
        .agg(pl.col("counted_flops").sum())
        .iter_rows()
    )
    assert set(counted) >= {"aten::mm"}
    assert derived == counted


def test_composites_carry_no_flops_when_their_leaves_do(both_counts) -> None:
    _, calls = both_counts
    composites = calls.filter(pl.col("name").is_in(["aten::linear", "aten::matmul"]))
    assert composites.height > 0
    assert composites.get_column("flops").min() > 0
    assert composites.get_column("counted_flops").max() == 0


def test_ops_without_formula_are_named_not_zero(both_counts) -> None:
    _, calls = both_counts
    missing = calls.filter(pl.col("formula").is_null())
    assert missing.get_column("flops").null_count() == missing.height
    assert "aten::view" in set(missing.get_column("name"))
