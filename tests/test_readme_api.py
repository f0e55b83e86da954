"""The README's Python session runs as written, in a fresh folder beside the sample traces."""

from __future__ import annotations

import contextlib
import io
import os
import re

import pytest
from support.testdata import REPO, SAMPLE_TRACES

pytestmark = pytest.mark.slow


def readme_session() -> str:
    text = (REPO / "README.md").read_text()
    block = re.search(r"<!-- api-session -->\n```python\n(.*?)```\n<!-- /api-session -->", text, re.S)
    assert block, "README.md has no api-session block"
    return block.group(1)


def test_the_readme_python_session_runs(tmp_path):
    (tmp_path / "sample_traces").symlink_to(SAMPLE_TRACES)
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(readme_session(), "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    lines = out.getvalue().splitlines()
    assert lines[0] == "22 traces in the warehouse"
    assert "ddp-ws1" in out.getvalue() and "exposed_comm_frac" in out.getvalue()
    assert "3 steps of rank 0" in lines
    assert lines[-1] == "True ['exposed_comm', 'compute']"
    assert (tmp_path / "report.html").stat().st_size > 100_000


def test_a_view_method_exists_for_every_public_view_with_filters():
    import inspect

    import tracehouse
    from tracehouse.pipeline.view_docs import load_contracts

    views = {c.relation for c in load_contracts()} | {"ingest_errors"}
    methods = {name for name, _ in inspect.getmembers(tracehouse.Warehouse, inspect.isfunction)}
    missing = sorted(views - methods - {"run_diff"})  # run_diff is wh.diff(a, b)
    assert not missing, f"tracehouse.Warehouse lacks {missing}"
    for name in views - {"ingest_errors", "run_diff"}:
        params = inspect.signature(getattr(tracehouse.Warehouse, name)).parameters
        assert {"study", "run"} <= set(params), name
