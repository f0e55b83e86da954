"""kernel_stats, launch_stats, memory_timeline and step_memory keep their contracts on every shared trace."""

from __future__ import annotations

import polars as pl
import pytest
from support.analysis_rawdb import parsed_db, rows
from support.testdata import SHARED_DATA
from tracehouse.pipeline.warehouse.view_docs import load_contracts

pytestmark = [pytest.mark.shared_data, pytest.mark.slow]

RELATIONS = ("kernel_stats", "launch_stats", "memory_timeline", "step_memory")
CONTRACTS = [c for c in load_contracts() if c.relation in RELATIONS]
TRACES = sorted(
    str(p.relative_to(SHARED_DATA / "traces")) for p in (SHARED_DATA / "traces").rglob("*.json.gz")
)


@pytest.mark.parametrize("rel", TRACES)
def test_contract_checks_hold(rel):
    from tracehouse.pipeline.parsers.kineto.parse import parse_trace

    parsed = parse_trace(SHARED_DATA / "traces" / rel)
    con = parsed_db([(parsed, {"study": "s", "run_id": "r", "rank": 0})])
    for contract in CONTRACTS:
        for check in contract.checks:
            bad = rows(con, f"SELECT count(*) AS n FROM {contract.relation} WHERE ({check}) IS NOT TRUE")
            assert bad == [{"n": 0}], f"{contract.relation}: {check}"
    kernels = rows(con, "SELECT coalesce(sum(calls), 0) AS n FROM kernel_stats")[0]["n"]
    on_streams = parsed.events.filter(pl.col("kind") == "kernel", pl.col("stream").is_not_null())
    assert kernels == on_streams.height
    memory = rows(con, "SELECT count(*) AS n FROM memory_timeline")[0]["n"]
    assert memory == parsed.memory_events.height
