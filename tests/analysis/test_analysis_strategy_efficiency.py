"""scale_points.strategy_scaling_efficiency: the scaling-efficiency rule within a run's own strategy.

Brute force on the sample study: each run's throughput against the best throughput at its
strategy's smallest world size, divided by the ratio of world sizes.
"""

from __future__ import annotations

import duckdb
import pytest


def test_strategy_efficiency_is_against_the_strategys_own_smallest_run(sample_warehouse):
    with duckdb.connect(str(sample_warehouse / "tracehouse.duckdb"), read_only=True) as c:
        c.execute("SET file_search_path = ?", [str(sample_warehouse)])
        rows = c.sql(
            "SELECT r.strategy, s.run_id, s.world_size, s.tokens_per_s, s.strategy_scaling_efficiency, "
            "s.strategy_base_world_size FROM scale_points s JOIN runs r USING (study, run_id)"
        ).fetchall()
    assert len({strategy for strategy, *_ in rows}) >= 3
    for strategy, run_id, world_size, tokens_per_s, efficiency, base_size in rows:
        same = [r for r in rows if r[0] == strategy]
        smallest = min(r[2] for r in same)
        best = max(r[3] for r in same if r[2] == smallest)
        assert base_size == smallest, run_id
        assert efficiency == pytest.approx((tokens_per_s / best) / (world_size / smallest), rel=1e-12), run_id
