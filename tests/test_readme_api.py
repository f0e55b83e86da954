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
    from tracehouse.pipeline.warehouse.view_docs import load_contracts

    views = {c.relation for c in load_contracts()} | {"ingest_errors"}
    methods = {name for name, _ in inspect.getmembers(tracehouse.Warehouse, inspect.isfunction)}
    missing = sorted(views - methods - {"run_diff"})  # run_diff is wh.diff(a, b)
    assert not missing, f"tracehouse.Warehouse lacks {missing}"
    for name in views - {"ingest_errors", "run_diff"}:
        params = inspect.signature(getattr(tracehouse.Warehouse, name)).parameters
        assert {"study", "run"} <= set(params), name


FIGURE_OF_CHART = {
    "breakdown": "fig-breakdown",
    "breakdown_share": "fig-breakdown-share",
    "waits_by_collective": "fig-waits-collective",
    "waits_by_kind": "fig-waits-kind",
    "roofline": "fig-roofline",
    "critical_path": "fig-critical-path",
    "throughput": "fig-throughput",
    "per_device": "fig-per-device",
    "efficiency": "fig-efficiency",
    "busbw": "fig-busbw",
    "rank_heatmap": "fig-ranks",
    "top_kernels": "fig-kernels",
    "power": "fig-power",
    "projected_throughput": "fig-projection-throughput",
    "projected_breakdown": "fig-projection-breakdown",
}


@pytest.fixture(scope="module")
def projected_warehouse(sample_warehouse, tmp_path_factory):
    """A copy of the sample warehouse with two runs projected by `tracehouse project`."""
    import shutil

    from tracehouse.pipeline.cli.main import main

    target = tmp_path_factory.mktemp("projected") / "warehouse"
    shutil.copytree(sample_warehouse, target)
    for run in ("ddp-ws2", "tp-ws2"):
        argv = ["project", "--warehouse", str(target), "--study", "tiny-cpu-gloo", "--run", run]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main([*argv, "--world-sizes", "4,16,64"]) == 0
    return target


def rounded(value):
    """A JSON value with floats to 12 significant digits (and content-hashed dataset names dropped)."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {("data" if str(k).startswith("data-") else k): rounded(v) for k, v in value.items()}
    if isinstance(value, str) and value.startswith("data-"):
        return "data"
    return value


def test_every_chart_is_the_reports_chart(projected_warehouse, tmp_path):
    import inspect

    import tracehouse
    from support import pagecheck

    public = {
        n for n, _ in inspect.getmembers(tracehouse.Charts, inspect.isfunction) if not n.startswith("_")
    }
    assert public == set(FIGURE_OF_CHART)
    with tracehouse.open(projected_warehouse) as wh:
        wh.report(tmp_path / "r.html")
        specs = pagecheck.read(tmp_path / "r.html").specs()
        for name, figure in FIGURE_OF_CHART.items():
            chart = getattr(wh.charts, name)(study="tiny-cpu-gloo")
            if figure in specs:  # floats to 12 digits: DuckDB's parallel sums differ in the last bit
                assert rounded(chart.to_dict()) == rounded(specs[figure]), name
            else:
                # the sample study has no power: a chart that says why, and the report's note says the same
                from tracehouse.reports.charts.kit import empty_reason

                assert empty_reason(chart).startswith("No power was captured"), name
    assert "fig-power" not in specs and len(specs) == len(FIGURE_OF_CHART) - 1
