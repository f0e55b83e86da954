"""The section "Projected scaling": its sentence and charts are the projections table, and it draws.

The warehouse is the sample study ingested, then projected by the real `tracehouse project`
(every run to 2,048 devices, and one run again under a second scenario).
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from support import pagecheck
from support.cdp import Browser, find_chromium
from tracehouse.pipeline.cli.main import build_parser, main
from tracehouse.reports.build import build_report
from tracehouse.reports.charts import projection as charts_projection
from tracehouse.reports.provenance import display_path
from tracehouse.reports.source import frame, open_warehouse

STUDY = "tiny-cpu-gloo"
WORLD_SIZES = "2,4,8,16,32,64,128,256,512,1024,2048"
SECOND_SCENARIO = ["--run", "ddp-ws2", "--world-sizes", "4,16,64", "--compute-speedup", "2"]
pytestmark = pytest.mark.slow  # a real ingest and a real projection

chromium = find_chromium()


def tracehouse(*argv: str) -> str:
    """Run the tracehouse command in-process; its stdout (a non-zero exit fails the test)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    assert status == 0, err.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def projected(sample_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sample warehouse with every run projected, and ddp-ws2 under a second scenario."""
    target = tmp_path_factory.mktemp("projected") / "warehouse"
    shutil.copytree(sample_warehouse, target)
    tracehouse("project", "--warehouse", str(target), "--study", STUDY, "--world-sizes", WORLD_SIZES)
    tracehouse("project", "--warehouse", str(target), "--study", STUDY, *SECOND_SCENARIO)
    return target


@pytest.fixture(scope="module")
def report(projected: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("projected-report") / "report.html"
    build_report(projected, out)
    return out


@pytest.fixture(scope="module")
def con(projected: Path):
    connection = open_warehouse(projected)
    yield connection
    connection.close()


def section_intro(page: Path) -> str:
    """The text of the projection section's intro paragraph."""
    found = re.search(r'<section id="projection">.*?<p class="intro"[^>]*>(.*?)</p>', page.read_text(), re.S)
    assert found, "the report has no projection section"
    return html.unescape(found.group(1))


def percent(x: float) -> str:
    value = 100 * x
    return f"{value:.0f} %" if value >= 10 else f"{value:.1f} %" if value >= 0.1 else "less than 0.1 %"


def test_the_headline_names_the_knee_and_the_largest_world_size(con, report: Path) -> None:
    # the run measured on the most devices (ties: the best measured throughput per device), baseline
    (run_id,) = frame(
        con,
        "SELECT run_id FROM projections WHERE study = $1 AND world_size = measured_world_size "
        "GROUP BY run_id ORDER BY max(measured_world_size) DESC, max(tokens_per_s_per_device) DESC, run_id "
        "LIMIT 1",
        STUDY,
    )["run_id"]
    curve = frame(
        con,
        "SELECT * FROM projections WHERE study = $1 AND run_id = $2 AND scenario = 'baseline' "
        "ORDER BY world_size",
        STUDY,
        run_id,
    )
    knee = curve.filter(curve["knee"])["world_size"].to_list()
    assert len(knee) == 1 and curve["world_size"].max() == 2048
    # the largest size that is a runnable configuration; the flagged ones (less than one sequence
    # per data-parallel rank) are named with the projection's own reason, not described
    runnable = curve.filter(curve["flag"].is_null())
    flagged = curve.filter(curve["flag"].is_not_null())
    top = runnable.row(-1, named=True)
    assert flagged.height and top["world_size"] < flagged["world_size"].min()
    dp_share = top["exposed_comm_dp_frac"] / top["exposed_comm_frac"]
    sizes = ", ".join(f"{n:,}" for n in flagged["world_size"])
    want = (
        f"{run_id} projected: {curve['knee_note'][0]}; at {top['world_size']:,} devices each device gives "
        f"{percent(top['scaling_efficiency'])} of its measured throughput, "
        f"{percent(top['exposed_comm_frac'])} of the step is exposed communication, "
        f"{percent(dp_share)} of it dp. Its error band there: the step time within a factor of "
        f"{top['step_time_high_us'] / top['step_time_us']:,.3g} "
        f"({json.loads(top['provenance'])['band']['basis']}). "
        f"Flagged at {sizes} devices: {flagged['flag'][0]}."
    )
    assert curve["knee_note"][0] == f"knee at {knee[0]} devices"
    assert charts_projection.headline_sentence(con, STUDY) == want
    intro = section_intro(report)
    assert intro.startswith(want + " ") and "docs/projection.md" in intro
    # the scaling of each device is the efficiency: per device against the run's measured point
    measured = curve.filter(curve["world_size"] == top["measured_world_size"]).row(0, named=True)
    ratio = top["tokens_per_s_per_device"] / measured["tokens_per_s_per_device"]
    assert ratio == pytest.approx(top["scaling_efficiency"], rel=1e-9)


def test_every_scenario_and_its_assumptions_are_on_the_page(con, report: Path) -> None:
    scenarios = frame(
        con, "SELECT DISTINCT scenario, assumptions FROM projections WHERE study = $1 ORDER BY 1", STUDY
    )
    assert scenarios["scenario"].to_list() == ["baseline", "compute-x2"]
    text = html.unescape(report.read_text())
    # what every scenario assumes is said once, then each scenario's own clauses (a search stores dozens)
    (baseline, compute) = (charts_projection.clauses_of(a) for a in scenarios["assumptions"])
    shared = [c for c in baseline if c in compute]
    assert shared and shared[0] == "strong scaling (fixed global batch)" and "compute x2" not in shared
    assert f"Assumed by every scenario: {'; '.join(shared)}. " in text
    assert "Assumptions, by scenario: baseline: nothing else. compute-x2: compute x2." in text
    # What a run's projection leaves out or assumes is said too, each note once with its runs: the
    # node capacity assumed (the sample manifests predate node_devices); every run's data-parallel
    # collectives are measured or planned (a pipeline's per stage), so no world size is left out.
    notes = frame(
        con,
        "SELECT notes, string_agg(DISTINCT run_id, ', ' ORDER BY run_id) AS runs FROM projections "
        "WHERE study = $1 AND notes IS NOT NULL GROUP BY notes ORDER BY min(run_id)",
        STUDY,
    )
    assert notes["runs"].to_list() == [
        "ddp-ws1, ddp-ws2, ddp-ws4, fsdp-ws1, fsdp-ws2, fsdp-ws4, fsdp_tp-ws4-tp2, pp-ws2, tp-ws2"
    ]
    assert notes["notes"][0].startswith("nodes assumed to hold 4 devices")
    said = "; ".join(f"{runs}: {note}" for note, runs in notes.iter_rows())
    assert f"Left out or assumed, by run: {said}." in text


@pytest.mark.parametrize(
    ("said", "clauses"),
    [
        ("weak scaling", ["weak scaling"]),
        ("a; b (c; d); e", ["a", "b (c; d)", "e"]),
        ("curves (matmul: 1 (x; y); attention: 2); x;y", ["curves (matmul: 1 (x; y); attention: 2)", "x;y"]),
    ],
)
def test_assumptions_split_into_clauses_outside_parentheses(said: str, clauses: list[str]) -> None:
    assert charts_projection.clauses_of(said) == clauses
    assert "; ".join(clauses) == said


def chart_data(page: Path, figure: str) -> list[dict]:
    spec = pagecheck.read(page).specs()[figure]
    (rows,) = spec["datasets"].values()
    return rows


def test_the_throughput_chart_is_the_table_and_the_measured_points(con, report: Path) -> None:
    rows = chart_data(report, "fig-projection-throughput")
    table = frame(
        con,
        "SELECT run_id || ' · ' || scenario AS curve, world_size, tokens_per_s_per_device, knee "
        "FROM projections WHERE study = $1 ORDER BY 1, 2",
        STUDY,
    )
    curves = sorted((r["curve"], r["world_size"]) for r in rows if r["source"] == "projected")
    assert curves == list(zip(table["curve"], table["world_size"], strict=True))
    by_point = {(r["curve"], r["world_size"]): r for r in rows if r["source"] == "projected"}
    for curve, world_size, tpd, knee in table.iter_rows():
        point = by_point[(curve, world_size)]
        assert point["tokens_per_s_per_device"] == pytest.approx(tpd, rel=1e-3)  # 4 significant digits
        assert point["knee"] == knee
    # one knee per curve (every run grows here), every one of them marked
    assert sum(r["knee"] for r in by_point.values()) == table["curve"].n_unique() == 10
    measured = frame(
        con,
        "SELECT run_id, world_size, tokens_per_s_per_device FROM scale_points WHERE study = $1 ORDER BY 1",
        STUDY,
    )
    dots = sorted(
        (r["curve"], r["world_size"], r["tokens_per_s_per_device"]) for r in rows if r["source"] == "measured"
    )
    assert [(run, ws) for run, ws, _ in dots] == list(
        zip(measured["run_id"], measured["world_size"], strict=True)
    )
    for (_, _, got), want in zip(dots, measured["tokens_per_s_per_device"], strict=True):
        assert got == pytest.approx(want, rel=1e-3)


PANEL = re.compile(r"(\w+): (\S+) \(measured on (\d+)\)(?: · (.+))?")


def test_the_breakdown_chart_is_each_strategys_largest_run(con, report: Path) -> None:
    rows = chart_data(report, "fig-projection-breakdown")
    strategies = frame(con, "SELECT DISTINCT strategy FROM runs WHERE study = $1 ORDER BY 1", STUDY)
    assert sorted({r["strategy"] for r in rows}) == strategies["strategy"].to_list()
    for row in rows:
        strategy, run_id, measured_on, scenario = PANEL.fullmatch(row["panel"]).groups()
        scenario = scenario or "baseline"
        largest = frame(
            con,
            "SELECT max(r.world_size) AS n FROM runs r JOIN projections p USING (study, run_id) "
            "WHERE r.study = $1 AND r.strategy = $2",
            STUDY,
            strategy,
        )["n"][0]
        point = frame(
            con,
            "SELECT p.* FROM projections p JOIN runs r USING (study, run_id) "
            "WHERE p.study = $1 AND p.run_id = $2 AND p.scenario = $3 AND p.world_size = $4",
            STUDY,
            run_id,
            scenario,
            row["world_size"],
        ).row(0, named=True)
        assert point["measured_world_size"] == largest == int(measured_on)
        for part, column in charts_projection.FRACTIONS.items():
            assert row[part] == pytest.approx(point[column], rel=1e-3, abs=1e-12), (row["panel"], part)
        assert sum(row[part] for part in charts_projection.FRACTIONS) == pytest.approx(1, abs=1e-3)
    # ddp-ws2's second scenario is not on a largest run: one scenario shown, so no panel names it
    assert not any(PANEL.fullmatch(r["panel"]).group(4) for r in rows)
    assert len({r["panel"] for r in rows}) == strategies.height


def test_the_charts_api_returns_the_reports_charts(projected: Path, report: Path) -> None:
    import tracehouse

    specs = pagecheck.read(report).specs()
    with tracehouse.open(projected) as wh:
        assert (
            wh.charts.projected_throughput().to_dict()["datasets"]
            == specs["fig-projection-throughput"]["datasets"]
        )
        assert (
            wh.charts.projected_breakdown().to_dict()["datasets"]
            == specs["fig-projection-breakdown"]["datasets"]
        )
        assert wh.projections(study=STUDY, run="ddp-ws2", scenario="compute-x2").pl()[
            "world_size"
        ].to_list() == [
            2,
            4,
            16,
            64,
        ]


def test_a_warehouse_without_projections_says_how_to_make_them(
    sample_warehouse: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    build_report(sample_warehouse, out)
    intro = section_intro(out)
    # the page names the warehouse as its masthead does: no temporary folder on a shared page
    label = display_path(str(sample_warehouse), parts=1)
    command = (
        f"tracehouse project --warehouse {label} --study {STUDY} --world-sizes 8,16,32,64,128,256,512,1024"
    )
    assert intro == f"No projection of this study is stored; make them with {command}."
    assert not any(name.startswith("fig-projection") for name in pagecheck.read(out).specs())
    args = build_parser().parse_args(
        shlex.split(command)[1:]
    )  # the sentence's command is one tracehouse runs
    # run from the warehouse's parent folder (the page names it by its own name)
    assert (args.command, sample_warehouse.parent / args.warehouse, args.study) == (
        "project",
        sample_warehouse,
        STUDY,
    )


@pytest.mark.skipif(chromium is None, reason="no chromium here (CI installs it: apt-get install -y chromium)")
def test_the_section_draws_without_console_errors(report: Path) -> None:
    charts_done = "document.body.getAttribute('data-charts-done')"
    state = """JSON.stringify(Array.from(document.querySelectorAll('#projection .chart')).map(c => [
        c.id, c.querySelectorAll('svg path, svg rect, svg text, svg line').length,
        c.getAttribute('data-failed'),
        Math.round(c.getBoundingClientRect().height)]))"""
    with Browser(chromium) as browser:
        browser.open(report.as_uri())
        browser.wait_for(charts_done, timeout=90)
        drawn = json.loads(browser.evaluate(state))
        assert [d[0] for d in drawn] == ["fig-projection-throughput", "fig-projection-breakdown"]
        for chart_id, marks, failed, height in drawn:
            assert failed is None and marks > 100 and height > 300, (chart_id, marks, failed, height)
        assert browser.console_problems() == []
        assert browser.requests() == [report.as_uri()]


def test_the_section_ranks_the_layouts_at_the_largest_size_where_one_is_runnable(con, report: Path) -> None:
    rows = frame(
        con,
        "SELECT p.run_id, p.world_size, p.tokens_per_s FROM projections p WHERE p.study = $1 "
        "AND p.scenario = 'baseline' AND p.flag IS NULL AND p.tokens_per_s > 0 "
        "AND p.world_size > p.measured_world_size ORDER BY p.world_size DESC, p.tokens_per_s DESC, p.run_id",
        STUDY,
    )
    size = rows["world_size"][0]
    order = rows.filter(rows["world_size"] == size)["run_id"].to_list()
    sentence = charts_projection.ranking_sentence(con, STUDY)
    assert sentence.startswith(
        f"At {size:,} devices (baseline), the study's layouts rank by projected tokens/s: "
    )
    named = re.findall(r"\d\. (\S+) \(", sentence)
    assert named == order[: charts_projection.RANKED_SHOWN]
    more = len(order) - len(named)
    assert sentence.endswith(f"; and {more} more." if more else ")."), sentence
    points = re.search(r'<div class="points" id="projection-points">(.*?)</div>', report.read_text(), re.S)
    assert points and sentence in html.unescape(points.group(1))


def test_a_run_projected_with_another_layout_stands_with_that_layouts_runs(
    projected: Path, tmp_path: Path
) -> None:
    target = tmp_path / "warehouse"
    shutil.copytree(projected, target)
    for layout in ("fsdp=4", "dp=1,tp=2"):
        tracehouse(
            "project", "--warehouse", str(target), "--study", STUDY, "--run", "ddp-ws2", "--layout", layout
        )
    connection = open_warehouse(target)
    try:
        rows = charts_projection.projected_rows(connection, STUDY)
        chart = charts_projection.throughput_chart(connection, STUDY).to_dict()
    finally:
        connection.close()
    by_scenario = {
        scenario: set(group["strategy"])
        for (scenario,), group in rows.filter(run_id="ddp-ws2").group_by("scenario")
    }
    assert by_scenario == {
        "baseline": {"ddp"},
        "compute-x2": {"ddp"},
        "as-fsdp": {"fsdp"},
        "as-ddp+tp2": {"tp"},  # split over 2 ranks: with the tp runs
    }
    (dataset,) = [d for d in chart["datasets"].values() if any("curve" in r for r in d)]
    panels = {r["curve"]: r["strategy"] for r in dataset if r.get("source") == "projected"}
    assert panels["ddp-ws2 · as-fsdp"] == "fsdp" and panels["ddp-ws2 · baseline"] == "ddp"
