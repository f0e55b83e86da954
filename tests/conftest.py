"""Shared test fixtures: the real public data (skipping when it is absent) and the sample study."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings
from support.testdata import SHARED_DATA, sample_runs

# Performance is measured by benchmarks, never by a test's clock: Hypothesis's per-example deadline
# failed a first example that paid for pyarrow's import on a loaded machine.
settings.register_profile("tracehouse", deadline=None)
settings.load_profile("tracehouse")


@pytest.fixture
def shared_data() -> Path:
    """The ../shared/data folder (skips the test when absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data is absent ({SHARED_DATA})")
    return SHARED_DATA


@pytest.fixture(scope="session")
def sample_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse ingested from sample_traces/ (skips while the collectors have not written any)."""
    from tracehouse.pipeline.ingest.driver import ingest

    runs = sample_runs()
    if not runs:
        pytest.skip("sample_traces/ holds no run yet (the collectors write them)")
    target = tmp_path_factory.mktemp("sample-warehouse")
    summary = ingest(runs, target)
    assert summary.failed == [], summary.failed
    _store_interference_fit(target)
    return target


def _store_interference_fit(warehouse: Path) -> None:
    """Fit the study's interference once, as its first `tracehouse project` does (and stores): the
    tests' copies of the warehouse project one run at a time without reading every run again."""
    from tracehouse.pipeline.projection.interference import store_fits
    from tracehouse.pipeline.projection.project import fit_study, node_size
    from tracehouse.pipeline.warehouse.database import connect, transaction
    from tracehouse.pipeline.warehouse.reading import open_reader

    with open_reader(warehouse) as con:
        studies = [s for (s,) in con.execute("SELECT DISTINCT study FROM runs").fetchall()]
        fits = {study: fit_study(con, study, node_size(con, study)[0]) for study in studies}
    with connect(warehouse) as con, transaction(con):
        for study, fit in fits.items():
            store_fits(con, study, fit)


@pytest.fixture(autouse=True)
def _default_warehouse(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command run without --warehouse uses a fresh folder, never ./warehouse of the checkout."""
    monkeypatch.setenv("TRACEHOUSE_WAREHOUSE", str(tmp_path_factory.mktemp("default") / "warehouse"))
