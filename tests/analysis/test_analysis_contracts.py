"""Every public view matches its contract (columns, types, checks), and docs/views.md is current."""

from __future__ import annotations

from contextlib import suppress

import pytest
from support.analysis_marts_fixture import study_db
from support.analysis_rawdb import parsed_db, rows
from support.testdata import PUBLIC_BY_DESIGN, shared_path
from tracehouse.pipeline.warehouse.view_docs import DOC_PATH, load_contracts, render

CONTRACTS = load_contracts()
pytestmark = pytest.mark.slow  # about 60 s on 2 busy cores (real traces through every view)


@pytest.fixture(scope="module")
def warehouses() -> list:
    """The hand-made study, plus two real ranks of one NCCL job when ../shared/data is there."""
    out = [study_db()]
    try:
        from tracehouse.pipeline.parsers.kineto.parse import parse_trace

        pair = [parse_trace(shared_path(f"traces/hta/pair_sampled_rank-{r}.json.gz")) for r in (0, 1)]
        out.append(
            parsed_db([(p, {"study": "real", "run_id": "pair", "rank": r}) for r, p in enumerate(pair)])
        )
    except pytest.skip.Exception:
        pass
    return [_with_critical_paths(con) for con in out]


def _with_critical_paths(con):
    """The replayed critical paths and op slack stored, as `tracehouse project` does."""
    from tracehouse.pipeline.common.errors import TracehouseError
    from tracehouse.pipeline.projection.critical_rows import StudyPaths, store_paths

    for study, runs in con.execute("SELECT study, list(run_id) FROM runs GROUP BY study").fetchall():
        paths = StudyPaths()
        for run in runs:
            with suppress(TracehouseError):  # stored with its reason
                paths.replay(con, study, run)
        store_paths(con, study, paths)
    return con


def test_every_public_view_has_a_contract():
    """The design card's public views that exist yet (ingest_errors is a raw table, in warehouse.md)."""
    names = {c.relation for c in CONTRACTS}
    built = PUBLIC_BY_DESIGN - {"network_curves", "projections", "ingest_errors"}
    assert built | {"step_energy", "step_stragglers", "collective_skew", "clock_offsets"} <= names


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.relation)
def test_columns_and_types(contract, warehouses):
    described = rows(warehouses[0], f"DESCRIBE {contract.relation}")
    got = {r["column_name"]: r["column_type"] for r in described}
    assert {c.name: c.type for c in contract.columns}.items() <= got.items()


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.relation)
def test_checks_hold_and_are_not_vacuous(contract, warehouses):
    total = 0
    for con in warehouses:
        total += rows(con, f"SELECT count(*) AS n FROM {contract.relation}")[0]["n"]
        for check in contract.checks:
            bad = rows(con, f"SELECT count(*) AS n FROM {contract.relation} WHERE ({check}) IS NOT TRUE")
            assert bad == [{"n": 0}], f"{contract.relation}: {check}"
    assert total > 0, f"no test warehouse has rows in {contract.relation}"


def test_views_doc_is_generated_from_the_contracts():
    assert DOC_PATH.read_text() == render(CONTRACTS), "run: python -m tracehouse.pipeline.warehouse.view_docs"
