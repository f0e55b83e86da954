"""Shared test fixtures: the real public data, skipping when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.testdata import SHARED_DATA


@pytest.fixture
def shared_data() -> Path:
    """The ../shared/data folder (skips the test when absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data is absent ({SHARED_DATA})")
    return SHARED_DATA
