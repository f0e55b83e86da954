"""The shipped CPU sample runs (sample_traces/, made by collectors/) through ingest and the views."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def con(sample_warehouse):
    from tracehouse.pipeline.warehouse import database

    return database.open_for_query(sample_warehouse)


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def test_world_size_one_runs_have_no_communication(con):
    got = con.sql(
        "SELECT r.run_id, sum(s.comm_us) FROM step_breakdown s JOIN runs r USING (study, run_id) "
        "WHERE r.world_size = 1 GROUP BY ALL"
    ).fetchall()
    assert got and all(comm == 0 for _, comm in got)


def test_ddp_all_reduces_carry_the_gradient_size(con):
    # each step all-reduces every gradient once: n_params x 4 bytes (fp32) per rank and step
    got = con.sql(
        "SELECT r.run_id, r.n_params, c.rank, sum(c.bytes) / count(DISTINCT s.step) "
        "FROM collectives c JOIN runs r USING (study, run_id) "
        "JOIN step_breakdown s ON s.study = c.study AND s.run_id = c.run_id AND s.rank = c.rank "
        "AND c.start_unix_ns >= s.window_start_unix_ns "
        "AND c.start_unix_ns < s.window_start_unix_ns + s.window_us * 1000 "
        "WHERE r.strategy = 'ddp' AND r.world_size = 2 AND c.op = 'all_reduce' GROUP BY ALL"
    ).fetchall()
    if not got:
        pytest.skip("no 2-rank DDP sample run yet")
    for _, n_params, _, bytes_per_step in got:
        assert bytes_per_step == n_params * 4


def test_fsdp_shows_all_gathers_and_reduce_scatters(con):
    got = con.sql(
        "SELECT DISTINCT c.op FROM collectives c JOIN runs r USING (study, run_id) WHERE r.strategy = 'fsdp'"
    ).fetchall()
    if not got:
        pytest.skip("no FSDP sample run yet")
    assert {"all_gather", "reduce_scatter"} <= {op for (op,) in got}
