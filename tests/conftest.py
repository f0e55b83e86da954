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
    return target


@pytest.fixture(autouse=True)
def _default_warehouse(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command run without --warehouse uses a fresh folder, never ./warehouse of the checkout."""
    monkeypatch.setenv("TRACEHOUSE_WAREHOUSE", str(tmp_path_factory.mktemp("default") / "warehouse"))
