"""top_kernels on CPU runs: ops by self time, so the ranked times never count a nested op twice.

METHODOLOGY ("Steps on a CPU-only trace"): compute is the self time of the main thread's
non-communication cpu_ops. So top_kernels' self times of those ops, summed over a run, are the
run's compute (rank_summary), to the rounding of a sum; inclusive times are not (an op nested in
`evaluate_function: MmBackward0` counted again in its parent, and in every ancestor).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

# top_kernels' CPU rows of one run split by the comm vocabulary, beside rank_summary's totals
PER_RUN = """
WITH comm_ops AS (
    SELECT pattern, kind FROM comm_vocabulary WHERE kind IN ('host_op_prefix', 'host_op_name')
),
ops AS (
    SELECT k.run_id, k.total_us, k.inclusive_us,
        EXISTS (
            SELECT 1 FROM comm_ops c
            WHERE (c.kind = 'host_op_prefix' AND starts_with(k.name, c.pattern))
               OR (c.kind = 'host_op_name' AND k.name = c.pattern)
        ) AS is_comm
    FROM top_kernels k WHERE k.rule = 'cpu'
)
SELECT o.run_id,
    sum(o.total_us) FILTER (WHERE NOT o.is_comm) AS self_compute_us,
    sum(o.total_us) AS self_us, sum(o.inclusive_us) AS inclusive_us,
    any_value(r.compute_us) AS compute_us, any_value(r.span_us) AS span_us
FROM ops o
JOIN (SELECT run_id, sum(compute_us) AS compute_us, sum(span_us) AS span_us FROM rank_summary GROUP BY 1) r
    USING (run_id)
GROUP BY o.run_id ORDER BY o.run_id
"""


def test_cpu_ops_self_time_sums_to_the_runs_compute(sample_warehouse: Path) -> None:
    with duckdb.connect(str(sample_warehouse / "tracehouse.duckdb"), read_only=True) as con:
        rows = con.sql(PER_RUN).fetchall()
    assert len(rows) >= 5
    for run_id, self_compute, self_all, inclusive, compute, span in rows:
        assert self_compute == pytest.approx(compute, rel=1e-9), run_id
        # every instant of a rank's main thread counts at most once: within the ranks' spans
        assert self_all <= span * (1 + 1e-9), run_id
        assert inclusive > self_all, run_id  # nesting exists, and inclusive time counts it again


def test_a_nested_op_is_not_counted_in_its_parent(sample_warehouse: Path) -> None:
    query = """
    SELECT name, total_us, inclusive_us FROM top_kernels
    WHERE run_id = 'ddp-ws1' AND name IN ('MmBackward0', 'autograd::engine::evaluate_function: MmBackward0')
    ORDER BY name
    """
    with duckdb.connect(str(sample_warehouse / "tracehouse.duckdb"), read_only=True) as con:
        rows = {name: (self_us, inclusive_us) for name, self_us, inclusive_us in con.sql(query).fetchall()}
    assert set(rows) == {"MmBackward0", "autograd::engine::evaluate_function: MmBackward0"}
    mm_self, mm_inclusive = rows["MmBackward0"]
    wrapper_self, wrapper_inclusive = rows["autograd::engine::evaluate_function: MmBackward0"]
    # the wrapper's inclusive time holds MmBackward0's; its self time holds only the wrapper's own
    assert wrapper_inclusive >= mm_inclusive
    assert wrapper_self < wrapper_inclusive - 0.9 * mm_inclusive
    assert mm_self < mm_inclusive  # MmBackward0 itself runs aten::mm inside
