"""Shared test fixtures: where the real public data lives, and skipping when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
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


@pytest.fixture
def shared_data() -> Path:
    """The ../shared/data folder (skips the test when absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data is absent ({SHARED_DATA})")
    return SHARED_DATA
