"""cpu_op_totals: per CPU-only run, each cpu_op's calls and summed duration; GPU runs have none."""

from __future__ import annotations

from pathlib import Path

from support.testdata import SAMPLE_TRACES, shared_path
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.pipeline.warehouse.reading import query


def test_cpu_op_totals_count_the_cpu_runs_ops_only(tmp_path: Path) -> None:
    gpu = shared_path("traces/tracelens/mi300_ddp_rank0_of8.json.gz")
    warehouse = tmp_path / "wh"
    assert ingest([SAMPLE_TRACES / "tiny-cpu-gloo" / "ddp-ws1"], warehouse).failed == []
    assert ingest([gpu], warehouse, study="gpu", run="mi300").failed == []
    _, totals = query(
        warehouse, "SELECT study, run_id, name, calls, total_ns FROM cpu_op_totals ORDER BY ALL"
    )
    _, expected = query(
        warehouse,
        "SELECT study, run_id, name, count(*), sum(dur_ns) FROM events "
        "WHERE kind = 'cpu_op' AND dur_ns > 0 AND study <> 'gpu' GROUP BY ALL ORDER BY ALL",
    )
    assert totals and totals == expected
    _, gpu_ops = query(warehouse, "SELECT count(*) FROM events WHERE kind = 'cpu_op' AND study = 'gpu'")
    assert gpu_ops[0][0] > 0  # the GPU run has host ops, and none of them is counted
