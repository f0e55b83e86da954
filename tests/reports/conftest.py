"""Warehouses for the report tests: fabricated ones (always), and one ingested from sample_traces/."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import devwarehouse
from support.hostile import HOSTILE, hostile_run
from support.testdata import sample_runs
from tracehouse.pipeline.ingest.driver import ingest


@pytest.fixture(scope="session")
def dev_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fabricated warehouse with power captured."""
    return devwarehouse.build(tmp_path_factory.mktemp("dev-warehouse"))


@pytest.fixture(scope="session")
def dev_warehouse_no_power(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fabricated warehouse of a study whose manifests say why no power was captured."""
    return devwarehouse.build(tmp_path_factory.mktemp("dev-warehouse-no-power"), power=False)


@pytest.fixture(scope="session")
def hostile_dev_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fabricated warehouse with markup in its study, host, kernel and file names."""
    names = devwarehouse.Names(
        study=HOSTILE["study"], host=HOSTILE["host"], kernel=HOSTILE["kernel"], error_path=HOSTILE["run_id"]
    )
    return devwarehouse.build(tmp_path_factory.mktemp("dev-warehouse-hostile"), names=names)


@pytest.fixture(scope="session")
def hostile_real_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real warehouse ingested from the hostile run."""
    root = tmp_path_factory.mktemp("hostile-real")
    summary = ingest([hostile_run(root / "run")], root / "warehouse")
    assert summary.failed == [], summary.failed
    return root / "warehouse"


@pytest.fixture(scope="session")
def showcase_warehouse(request: pytest.FixtureRequest) -> Path:
    """The warehouse the README screenshot shows: sample_traces/ when present, else the fabricated one."""
    if sample_runs():
        return request.getfixturevalue("sample_warehouse")
    return request.getfixturevalue("dev_warehouse")
