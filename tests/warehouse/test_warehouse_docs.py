"""docs/warehouse.md documents exactly the raw tables schema.py and sql/raw define."""

from __future__ import annotations

from warehouse_doc import DOC, render


def test_docs_match_schema():
    assert DOC.read_text() == render(), (
        "docs/warehouse.md is stale: run .venv/bin/python tests/warehouse/warehouse_doc.py"
    )
