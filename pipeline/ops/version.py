"""The version of the formulas: a digest of pipeline/ops's sources (standard library only)."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path


@cache
def formulas_version() -> str:
    """A digest of the formula modules' sources: op_calls rows costed by other formulas are stale."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]
