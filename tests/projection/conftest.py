"""Warehouses the projection tests replay: every shared GPU trace (one run each; the two
pair_sampled ranks as one run) and the sample study."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.testdata import SHARED_DATA

PAIR = "pair_sampled"


def _run_name(path: Path) -> str:
    stem = path.name.split(".json")[0].removesuffix(".pt.trace")
    return PAIR if stem.startswith(PAIR) else stem


@pytest.fixture(scope="session")
def shared_traces_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every trace of ../shared/data/traces ingested, study `shared`, one run per trace."""
    from tracehouse.pipeline.ingest.driver import ingest

    folder = SHARED_DATA / "traces"
    if not folder.is_dir():
        pytest.skip(f"../shared/data is absent ({SHARED_DATA}); the real public traces live there")
    target = tmp_path_factory.mktemp("shared-traces")
    by_run: dict[str, list[Path]] = {}
    for path in sorted(folder.rglob("*.json*")):
        by_run.setdefault(_run_name(path), []).append(path)
    for run, paths in by_run.items():
        summary = ingest(paths, target, study="shared", run=run)
        if summary.failed and len(paths) == 1:  # a trace without distributedInfo: it is rank 0
            summary = ingest(paths, target, study="shared", run=run, ranks={str(paths[0]): 0})
        assert summary.failed == [], summary.failed
    return target
