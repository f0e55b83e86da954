"""The report in a real headless Chromium with networking cut off: every chart draws, nothing is fetched.

Set TRACEHOUSE_UPDATE_SCREENSHOT=1 to rewrite docs/report-screenshot.png (the README's picture).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import duckdb
import pytest
from support import pagecheck
from support.cdp import Browser, find_chromium
from tracehouse.reports.build import build_report

REPO = Path(__file__).resolve().parents[2]
SCREENSHOT = REPO / "docs" / "report-screenshot.png"
CHARTS_DONE = "document.body.getAttribute('data-charts-done')"
# Per chart container: [id, drawn SVG elements, failed flag, height in CSS px].
CHART_STATE = """JSON.stringify(Array.from(document.querySelectorAll('.chart')).map(c => [
    c.id,
    c.querySelectorAll('svg path, svg rect, svg text, svg line').length + c.querySelectorAll('canvas').length,
    c.getAttribute('data-failed'), Math.round(c.getBoundingClientRect().height)]))"""

chromium = find_chromium()
needs_chromium = pytest.mark.skipif(
    chromium is None, reason="no chromium here (CI installs it: apt-get install -y chromium)"
)


def _open(browser: Browser, page: Path) -> list:
    browser.open(page.as_uri())
    browser.wait_for(CHARTS_DONE, timeout=90)
    return json.loads(browser.evaluate(CHART_STATE))


# Page width against the window: the page itself never scrolls sideways (a wide chart shrinks).
OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"
# Tick and mark labels of one chart, as drawn.
LABELS = "JSON.stringify(Array.from(document.querySelectorAll('#{} svg text')).map(t => t.textContent))"


@needs_chromium
@pytest.mark.parametrize("width", [1400, 800])
def test_every_chart_renders_offline_without_console_errors(
    showcase_warehouse: Path, tmp_path: Path, width: int
) -> None:
    out = tmp_path / "report.html"
    result = build_report(showcase_warehouse, out)
    expected = list(pagecheck.read(out).specs())
    with Browser(chromium, width=width) as browser:
        state = _open(browser, out)
        assert browser.evaluate(OVERFLOW) == 0
        assert [s[0] for s in state] == expected and len(expected) == result.charts
        for chart_id, drawn, failed, height in state:
            assert failed is None and drawn > 10 and height > 50, (chart_id, drawn, failed, height)
        assert browser.evaluate(CHARTS_DONE) == str(result.charts)
        assert browser.console_problems() == []
        assert browser.requests() == [out.as_uri()]
        shot = browser.screenshot(tmp_path / "shot.png", width=width, height=1500)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("TRACEHOUSE_UPDATE_SCREENSHOT") == "1" and width == 1400:
            SCREENSHOT.parent.mkdir(exist_ok=True)
            SCREENSHOT.write_bytes(shot.read_bytes())


@needs_chromium
def test_strategy_selector_filters_every_chart(dev_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    build_report(dev_warehouse, out)
    with Browser(chromium) as browser:
        before = dict((s[0], s[1]) for s in _open(browser, out))
        browser.evaluate(
            "(() => { const picker = document.getElementById('strategy-picker'); picker.value = 'fsdp';"
            "picker.dispatchEvent(new Event('change')); return new Promise(r => setTimeout(r, 500)); })()"
        )
        after = dict((s[0], s[1]) for s in json.loads(browser.evaluate(CHART_STATE)))
        # one of two strategies left: fewer marks in the line and bar charts
        for chart_id in ("fig-throughput", "fig-breakdown", "fig-efficiency"):
            assert after[chart_id] < before[chart_id], chart_id
        # and the words follow: the headline is fsdp's alone
        shown = browser.evaluate("document.querySelector('#headline dl:not([hidden])').textContent")
        assert "fsdp against its own 1-device run" in shown and "ddp against" not in shown
        assert "strategies fsdp." in shown
        assert browser.console_problems() == []


@needs_chromium
def test_hostile_names_run_no_script_in_the_browser(hostile_real_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    build_report(hostile_real_warehouse, out)
    with Browser(chromium) as browser:
        _open(browser, out)
        assert browser.evaluate("typeof window.__pwned") == "undefined"
        assert browser.evaluate("document.querySelectorAll('img, iframe, b, .chart script').length") == 0
        assert browser.evaluate("document.querySelector('h1').textContent").startswith("<script>")
        assert browser.console_problems() == []


@needs_chromium
def test_the_comparison_section_draws(sample_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = build_report(sample_warehouse, out, compare=("ddp-ws2", "ddp-ws4"))
    with Browser(chromium) as browser:
        state = {s[0]: s for s in _open(browser, out)}
        assert len(state) == result.charts
        _, drawn, failed, height = state["fig-comparison"]
        assert failed is None and drawn > 20 and height > 200
        intro = browser.evaluate("document.querySelector('#comparison p').textContent")
        assert intro.startswith("A step of tiny-cpu-gloo/ddp-ws4 takes 117.5 ms against 48.0 ms")
        assert browser.console_problems() == []


@needs_chromium
def test_repeats_knees_and_axes_read_once_and_plainly(grain_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    build_report(grain_warehouse, out, study="tiny-cpu-gloo")
    with duckdb.connect(str(grain_warehouse / "tracehouse.duckdb"), read_only=True) as con:
        knees = con.sql(
            "SELECT count(DISTINCT (r.strategy, p.world_size)) FROM projections p "
            "JOIN runs r USING (study, run_id) WHERE p.knee AND p.study = 'tiny-cpu-gloo'"
        ).fetchall()[0][0]
    with Browser(chromium, width=1400) as browser:
        _open(browser, out)
        projected = json.loads(browser.evaluate(LABELS.format("fig-projection-throughput")))
        labels = [t for t in projected if t.startswith("knee ")]
        # one label per strategy and knee size, however many curves share it (the repeat among them)
        assert len(labels) == knees > 0 and "knee 8 (4 runs)" in labels
        for chart_id in ("fig-projection-throughput", "fig-throughput"):
            ticks = json.loads(browser.evaluate(LABELS.format(chart_id)))
            # 0.1 reads 0.1, never the SI "100m"
            assert not [t for t in ticks if re.fullmatch(r"[\d.]+[mµu]", t)], (chart_id, ticks)
        bars = json.loads(browser.evaluate(LABELS.format("fig-breakdown")))
        assert "ddp-ws2 · 2 devices" in bars and "ddp-ws2-repeat · 2 devices" in bars
        assert browser.console_problems() == []


@needs_chromium
@pytest.mark.parametrize("width", [1400, 800])
def test_inside_the_step_draws_with_its_sentences(grain_warehouse: Path, tmp_path: Path, width: int) -> None:
    out = tmp_path / "report.html"
    build_report(grain_warehouse, out, study="tiny-cpu-gloo")
    with duckdb.connect(str(grain_warehouse / "tracehouse.duckdb"), read_only=True) as con:
        runs = con.sql("SELECT count(*) FROM runs WHERE study = 'tiny-cpu-gloo'").fetchall()[0][0]
        visited = con.sql(
            "SELECT count(DISTINCT rank) FROM critical_path WHERE run_id = 'fsdp_tp-ws4-tp2' AND step = ("
            "SELECT arg_max(step, step_us ORDER BY step) FROM critical_path WHERE run_id = 'fsdp_tp-ws4-tp2')"
        ).fetchall()[0][0]
    with Browser(chromium, width=width) as browser:
        state = {s[0]: s for s in _open(browser, out)}
        for chart_id in ("fig-roofline", "fig-critical-path"):
            _, drawn, failed, height = state[chart_id]
            assert failed is None and drawn > 50 and height > 200, state[chart_id]
        assert browser.evaluate(OVERFLOW) == 0
        shown = json.loads(
            browser.evaluate(
                "JSON.stringify(Array.from(document.querySelectorAll('#inside-points ul:not([hidden]) li'))"
                ".map(li => li.textContent))"
            )
        )
        assert len(shown) == runs and all("critical path" in line for line in shown)
        # the path's lanes are the ranks it visits
        lanes = [
            t
            for t in json.loads(browser.evaluate(LABELS.format("fig-critical-path")))
            if t.startswith("rank ")
        ]
        assert len(set(lanes)) >= visited > 1
        # the picker narrows the sentences to one strategy's runs
        browser.evaluate(
            "(() => { const picker = document.getElementById('strategy-picker'); picker.value = 'pp';"
            "picker.dispatchEvent(new Event('change')); return new Promise(r => setTimeout(r, 500)); })()"
        )
        shown = browser.evaluate("document.querySelector('#inside-points ul:not([hidden])').textContent")
        assert shown.startswith("pp-ws2 (pp, 2 devices)") and "ddp" not in shown
        assert browser.console_problems() == []
