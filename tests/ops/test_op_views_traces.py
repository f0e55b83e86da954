"""op_breakdown on real traces: the sample study (CPU, gloo) and a shared H100 trace.

* the sample study's DDP ranks: per step, the matmul FLOPs op_breakdown derives from the trace
  equal FlopCounterMode's for one step of the same model and per-rank batch;
* every CPU rank: its compute ops' self time (ops that are not communication) sums to
  rank_summary.compute_us;
* the shared H100 BERT trace: op_breakdown's FLOPs per op equal the Python once-only rule over
  the same trace read directly (tests/support/host_ops.py), and every bound is reached by at
  most 100 %.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from support.host_ops import host_ops
from support.testdata import shared_path
from tracehouse.pipeline.ops.costs import innermost_flops, op_costs

pytestmark = pytest.mark.slow
SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


@pytest.fixture(scope="module")
def con(sample_warehouse):
    from tracehouse.pipeline.warehouse import database

    return database.open_for_query(sample_warehouse)


def _flop_counter_mm_per_step(spec: dict) -> int:
    """FlopCounterMode's mm FLOPs for one training step of the run's model on one DDP rank."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    from tracehouse.collectors.llama import Llama, cross_entropy, synthetic_batch
    from tracehouse.collectors.model_sizes import get_model_config

    cfg = get_model_config(spec["model"])
    model = Llama(cfg)
    batch = spec["global_batch"] // spec["world_size"]
    inputs, targets = synthetic_batch(cfg, global_batch=batch, seq_len=spec["seq_len"], step=0, seed=0)
    with FlopCounterMode(display=False) as counter:
        cross_entropy(model(inputs), targets).backward()
    return sum(n for op, n in counter.get_flop_counts()["Global"].items() if op is torch.ops.aten.mm)


def test_ddp_matmul_flops_per_step_equal_flop_counter(con) -> None:
    runs = con.sql(
        "SELECT DISTINCT run_id FROM runs WHERE strategy = 'ddp' AND study = 'tiny-cpu-gloo'"
    ).fetchall()
    assert runs
    for (run_id,) in runs:
        spec = json.loads((SAMPLES / "tiny-cpu-gloo" / run_id / "run_spec.json").read_text())
        expected = _flop_counter_mm_per_step(spec)
        got = con.sql(
            "SELECT DISTINCT sum(flops) FROM op_breakdown "
            f"WHERE run_id = '{run_id}' AND op = 'aten::mm' AND step IS NOT NULL GROUP BY rank, step"
        ).fetchall()
        assert got == [(expected,)], run_id


def test_cpu_compute_self_time_sums_to_rank_summary(con) -> None:
    got = con.sql(
        """
        WITH comm AS (
            SELECT pattern, kind FROM comm_vocabulary WHERE kind IN ('host_op_prefix', 'host_op_name')
        ),
        compute AS (
            SELECT o.study, o.run_id, o.rank, sum(o.host_us) AS host_us
            FROM op_breakdown AS o
            WHERE NOT EXISTS (
                SELECT 1 FROM comm AS c
                WHERE (c.kind = 'host_op_prefix' AND starts_with(o.op, c.pattern))
                    OR (c.kind = 'host_op_name' AND o.op = c.pattern)
            )
            GROUP BY ALL
        )
        SELECT r.run_id, r.rank, r.compute_us, c.host_us
        FROM rank_summary AS r JOIN compute AS c USING (study, run_id, rank)
        WHERE r.rule = 'cpu'
        """
    ).fetchall()
    assert got
    for run_id, rank, compute_us, host_us in got:
        assert host_us == pytest.approx(compute_us, rel=1e-9), (run_id, rank)


@pytest.fixture(scope="module")
def h100(tmp_path_factory):
    from tracehouse.pipeline.ingest.driver import ingest
    from tracehouse.pipeline.warehouse import database

    trace = shared_path("traces/tracelens/h100_bert_small.json.gz")
    target = tmp_path_factory.mktemp("h100")
    summary = ingest([trace], target)
    assert summary.failed == [], summary.failed
    return trace, database.open_for_query(target)


def test_h100_flops_per_op_equal_the_python_rule(h100) -> None:
    trace, con = h100
    calls = innermost_flops(op_costs(host_ops(trace)))
    expected = dict(
        calls.filter(pl.col("counted_flops") > 0)
        .group_by("name")
        .agg(pl.col("counted_flops").sum())
        .iter_rows()
    )
    got = dict(con.sql("SELECT op, sum(flops) FROM op_breakdown WHERE flops > 0 GROUP BY op").fetchall())
    assert expected and got == expected


def test_h100_bounds_are_the_roofline_and_never_exceeded(h100) -> None:
    _, con = h100
    rows = con.sql(
        "SELECT op, intensity, bound_tflops, bound_frac FROM op_breakdown WHERE bound_tflops IS NOT NULL"
    ).fetchall()
    assert rows
    for op, intensity, bound, frac in rows:
        # bf16 on an H100 SXM: 989.4 TFLOP/s peak, 3.35 TB/s
        assert bound == pytest.approx(989.4 if intensity is None else min(989.4, intensity * 3.35)), op
        assert frac is None or 0 <= frac <= 1.0, op


def test_h100_scale_point_compute_efficiency_rolls_up_op_breakdown(h100) -> None:
    """scale_points' compute figures over op_breakdown's rows of the step windows (device time: a GPU
    rank): the time-weighted bound fraction, the share below half, the share with a bound."""
    _, con = h100
    ops = con.sql(
        "SELECT device_us, bound_frac FROM op_breakdown WHERE step IS NOT NULL AND device_us > 0"
    ).pl()
    bounded = ops.filter(pl.col("bound_frac").is_not_null())
    want = (
        (bounded["device_us"] * bounded["bound_frac"]).sum() / bounded["device_us"].sum(),
        bounded.filter(pl.col("bound_frac") < 0.5)["device_us"].sum() / bounded["device_us"].sum(),
        bounded["device_us"].sum() / ops["device_us"].sum(),
    )
    ((efficiency, below_half, share),) = con.sql(
        "SELECT compute_efficiency, compute_below_half_bound_frac, compute_bounded_frac FROM scale_points"
    ).fetchall()
    assert 0 < share < 1  # the trace has time in ops without a formula
    assert (efficiency, below_half, share) == pytest.approx(want, rel=1e-9)
