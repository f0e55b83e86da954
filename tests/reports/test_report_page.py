"""The HTML page: order of sections, one copy of the Vega libraries, no network, no injected markup."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import pagecheck
from support.hostile import HOSTILE
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.reports.build import build_report
from tracehouse.reports.html import script_safe_json

SECTION_ORDER = [
    "headline",
    "breakdown",
    "waits",
    "inside",
    "scaling",
    "projection",
    "power",
    "collectives",
    "stragglers",
    "kernels",
    "methodology",
    "provenance",
]


@pytest.fixture(scope="module")
def dev_page(dev_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pagecheck.Page]:
    out = tmp_path_factory.mktemp("page") / "report.html"
    build_report(dev_warehouse, out)
    return out, pagecheck.read(out)


def test_sections_come_in_the_designed_order(dev_page) -> None:
    _, page = dev_page
    sections = [a["id"] for tag, a in page.tags if tag == "section"]
    assert sections == SECTION_ORDER
    charts = [a["id"] for tag, a in page.tags if a.get("class") == "chart"]
    assert charts == [
        "fig-breakdown",
        "fig-breakdown-share",
        "fig-throughput",
        "fig-per-device",
        "fig-efficiency",
        "fig-power",
        "fig-busbw",
        "fig-ranks",
        "fig-kernels",
    ]
    assert set(page.specs()) == set(charts)


def test_vega_is_inlined_once_and_nothing_is_fetched(dev_page) -> None:
    path, page = dev_page
    code = [text for attrs, text in page.scripts if attrs.get("type") != "application/json"]
    assert len(code) == 2  # the Vega bundle and the page's own boot script
    assert sum(text.count("vegaEmbed") > 0 for text in code) == 2
    assert not [a for tag, a in page.tags if a.get("src") or (tag == "link" and a.get("href"))]
    assert 0.5e6 < path.stat().st_size < 2.5e6  # one ~0.9 MB bundle, not one per chart


def test_every_spec_declares_the_strategy_signal(dev_page) -> None:
    _, page = dev_page
    for chart_id, spec in page.specs().items():
        assert {"name": "strategy_pick", "value": "all"} in spec["params"], chart_id


def test_script_safe_json_round_trips_and_cannot_close_a_script() -> None:
    value = {"name": HOSTILE["kernel"], "x": "\u2028<>&"}
    text = script_safe_json(value)
    assert json.loads(text) == value
    assert not re.search(r"[<>&\u2028]", text)


def _assert_inert(page: pagecheck.Page, charts: int) -> None:
    tags = {tag for tag, _ in page.tags}
    assert not tags & {"img", "iframe", "svg", "b"}, tags
    scripts = [a for a, _ in page.scripts]
    assert len(scripts) == charts + 2
    assert all(a in ({}, {"type": "application/json", "data-chart": a.get("data-chart")}) for a in scripts)
    assert not [a for _, a in page.tags if any(k.startswith("on") for k in a)]


def test_hostile_names_stay_text_fabricated(hostile_dev_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = build_report(hostile_dev_warehouse, out)
    page = pagecheck.read(out)
    _assert_inert(page, result.charts)
    text = out.read_text()
    assert "&lt;script&gt;window.__pwned=&#39;study&#39;&lt;/script&gt; study" in text  # the <h1>
    kernels = page.specs()["fig-kernels"]
    names = {row["name"] for rows in kernels["datasets"].values() for row in rows}
    assert HOSTILE["kernel"] in names  # the spec still carries the exact name


def test_hostile_names_stay_text_ingested(hostile_real_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = build_report(hostile_real_warehouse, out)
    _assert_inert(pagecheck.read(out), result.charts)
    assert result.study == HOSTILE["study"]


def test_report_and_analyze_commands(dev_warehouse: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.html"
    assert (
        main(["report", "--warehouse", str(dev_warehouse), "-o", str(out), "--png", str(tmp_path / "png")])
        == 0
    )
    assert f"wrote {out} (9 charts" in capsys.readouterr().out
    pngs = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert len(pngs) == 9 and "breakdown.png" in pngs
    assert (tmp_path / "png" / "breakdown.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_analyze_ingests_then_reports(tmp_path: Path, capsys) -> None:
    from support.hostile import hostile_run

    out = tmp_path / "a.html"
    assert main(["analyze", str(hostile_run(tmp_path / "run")), "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out and out.stat().st_size > 0


def test_unknown_study_and_missing_warehouse_are_one_line_errors(
    dev_warehouse: Path, tmp_path: Path, capsys
) -> None:
    with pytest.raises(WarehouseError, match="no study named 'nope'; the warehouse has: llama2"):
        build_report(dev_warehouse, tmp_path / "x.html", study="nope")
    assert main(["report", "--warehouse", str(tmp_path / "none"), "-o", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no warehouse here" in err


def test_analyze_with_nothing_loadable_says_so(tmp_path, capsys):
    from tracehouse.pipeline.cli.main import main

    code = main(["analyze", str(tmp_path / "none"), "-o", str(tmp_path / "r.html")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not (tmp_path / "r.html").exists()
    assert err[-1] == "tracehouse analyze: error: no trace was loaded, so there is nothing to report"
