"""`tracehouse report --compare A B`: the comparison section says what run_diff says."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import pagecheck
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.compare import diff_runs
from tracehouse.pipeline.warehouse.database import open_for_query
from tracehouse.reports.charts.comparison import comparison_rows, comparison_sentence


def test_the_section_follows_the_diff(sample_warehouse: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "report.html"
    args = [
        "report",
        "--warehouse",
        str(sample_warehouse),
        "-o",
        str(out),
        "--compare",
        "fsdp-ws2",
        "fsdp-ws4",
    ]
    assert main(args) == 0
    with open_for_query(sample_warehouse) as c:
        diff = diff_runs(c, "fsdp-ws2", "fsdp-ws4")
    html = out.read_text()
    assert 'id="comparison"' in html and comparison_sentence(diff) in html
    specs = pagecheck.read(out).specs()
    assert "fig-comparison" in specs
    rows = comparison_rows(diff)
    components = rows.filter(rows["panel"] == "step-time components")
    assert components["change_us"].sum() == pytest.approx(diff.step_change_us, abs=1e-6)
    assert rows.height == 4 + min(10, len(diff.regressions) + len(diff.improvements))


def test_the_sentence_names_the_largest_component():
    from tracehouse.pipeline.compare import RunDiff, RunRef

    def part(name: str, change: float) -> dict:
        return {"name": name, "change_us": change, "share_of_step_change": change / 10_000}

    diff = RunDiff(
        a=RunRef(study="s", run_id="a"),
        b=RunRef(study="s", run_id="b"),
        step_a_us=20_000.0,
        step_b_us=30_000.0,
        components=[
            part("compute", 2_000),
            part("exposed_comm", 7_000),
            part("idle", 1_000),
            part("other", 0),
        ],
    )
    assert comparison_sentence(diff) == (
        "A step of s/b takes 30.0 ms against 20.0 ms for s/a: 50.0 % slower. "
        "Exposed communication accounts for 70 % of the change (+7.0 ms)."
    )


def test_an_unknown_run_is_one_line(sample_warehouse: Path, tmp_path: Path, capsys) -> None:
    args = [
        "report",
        "--warehouse",
        str(sample_warehouse),
        "-o",
        str(tmp_path / "r.html"),
        "--compare",
        "x",
        "y",
    ]
    assert main(args) == 2
    assert capsys.readouterr().err.startswith("tracehouse report: error: no run 'x' with a step time")
