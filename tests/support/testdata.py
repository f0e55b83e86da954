"""Where the test data lives: the real public files in ../shared/data and the shipped sample traces.

A plain module (not conftest.py, which several test folders have) so tests can import it by name.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(os.environ.get("TRACEHOUSE_SHARED_DATA", REPO.parent / "shared" / "data"))
SAMPLE_TRACES = REPO / "sample_traces"


def shared_path(relative: str) -> Path:
    """A file under ../shared/data, or skip the calling test when that folder is absent."""
    path = SHARED_DATA / relative
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data is absent ({SHARED_DATA}); the real public traces live there")
    if not path.exists():
        pytest.fail(f"{path} is missing from ../shared/data")
    return path


def sample_runs() -> list[Path]:
    """Run folders (with a manifest) under sample_traces/."""
    return sorted(p.parent for p in SAMPLE_TRACES.rglob("manifest.json")) if SAMPLE_TRACES.is_dir() else []


# The public views of the design card (../shared/DESIGN.md, "Public views"); more may be added.
PUBLIC_BY_DESIGN = frozenset(
    {
        "runs",
        "step_breakdown",
        "rank_summary",
        "collectives",
        "collective_instances",
        "scale_points",
        "power_samples",
        "ingest_errors",
        "comm_exposure",
        "exposed_comm_by_collective",
        "idle_causes",
        "network_curves",
        "projections",
        "trace_coverage",
        "run_diff",
    }
)
