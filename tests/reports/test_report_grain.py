"""Every chart draws one mark per run and its numbers are the public view's, run by run.

The warehouse (conftest.grain_warehouse) is the real sample study with a repeat of ddp-ws2 (a
second run of the same strategy and size) and a study of unrelated one-device runs without a
manifest. A chart that summed runs (a repeat as one bar of twice the step time; unrelated runs as
one "1 device" bar) or pooled their kernel names would fail here: each test takes the data out of
the chart's spec and compares it, per run, with a query of the view the chart draws.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import altair as alt
import pytest
from conftest import REPEAT, REPEAT_OF, UNRELATED, UNRELATED_STUDY
from tracehouse.reports.charts import (
    breakdown,
    collectives,
    kernels,
    kit,
    power,
    projection,
    ranks,
    scaling,
    waits,
)
from tracehouse.reports.headline import headline
from tracehouse.reports.source import open_warehouse

STUDY = "tiny-cpu-gloo"
BOTH = pytest.mark.parametrize("study", [STUDY, UNRELATED_STUDY])


@pytest.fixture(scope="module")
def con(grain_warehouse: Path):
    connection = open_warehouse(grain_warehouse)
    yield connection
    connection.close()


def view(con, query: str, *params: object) -> list[dict]:
    """Rows of a query of the public views."""
    return con.sql(query, params=list(params) or None).pl().to_dicts()


def chart_rows(chart: alt.TopLevelMixin) -> list[dict]:
    """The rows a chart's spec carries (its inline datasets)."""
    spec = chart.to_dict()
    rows = [row for values in spec.get("datasets", {}).values() for row in values]
    return rows or spec.get("data", {}).get("values", [])


def summed(rows: list[dict], key: str | tuple[str, ...], value: str) -> dict:
    """value summed per key (a field, or a tuple of fields) over the rows."""
    out: dict = defaultdict(float)
    for row in rows:
        out[row[key] if isinstance(key, str) else tuple(row[k] for k in key)] += row[value] or 0.0
    return dict(out)


def step_ms(con, study: str) -> dict[str, float]:
    rows = view(
        con,
        "SELECT run_id, step_time_us FROM scale_points WHERE study = $1 AND compute_frac IS NOT NULL",
        study,
    )
    return {r["run_id"]: r["step_time_us"] / 1e3 for r in rows}


def test_the_fixture_has_a_repeat_and_unrelated_runs(con) -> None:
    expected = step_ms(con, STUDY)
    assert expected[REPEAT] == pytest.approx(expected[REPEAT_OF])  # the same steps, measured twice
    assert set(step_ms(con, UNRELATED_STUDY)) == {Path(name).name for name in UNRELATED}


@BOTH
def test_breakdown_bars_are_one_per_run_and_equal_scale_points(con, study: str) -> None:
    rows = breakdown.breakdown_rows(con, study)
    expected = step_ms(con, study)
    for chart in (breakdown.step_breakdown_chart(rows), breakdown.breakdown_share_chart(rows)):
        data, spec = chart_rows(chart), chart.to_dict()
        # what one bar stacks: the rows of one value of the x field (within its strategy's panel)
        bars = summed(data, (spec["facet"]["column"]["field"], spec["spec"]["encoding"]["x"]["field"]), "ms")
        runs = {(r["strategy"], r["run_label"]): r["run_id"] for r in data}
        # one bar per run, as tall as that run's step: never a sum over runs
        assert {runs[bar]: ms for bar, ms in bars.items()} == pytest.approx(expected)
        assert len(bars) == len(expected)
        assert spec["resolve"]["scale"]["x"] == "independent"  # a panel has only its own runs


def test_unrelated_runs_are_never_one_bar(con) -> None:
    data = chart_rows(breakdown.step_breakdown_chart(breakdown.breakdown_rows(con, UNRELATED_STUDY)))
    per_bar = summed(data, "run_label", "ms")
    assert len(per_bar) == len(UNRELATED)
    assert max(per_bar.values()) == pytest.approx(max(step_ms(con, UNRELATED_STUDY).values()))


@BOTH
def test_waiting_bars_split_each_runs_exposed_communication_and_idle(con, study: str) -> None:
    shares = view(
        con,
        "SELECT run_id, step_time_us, exposed_comm_frac, idle_frac FROM scale_points "
        "WHERE study = $1 AND compute_frac IS NOT NULL",
        study,
    )
    kind = chart_rows(waits.kind_chart(waits.kind_rows(con, study)))
    expected = {
        r["run_id"]: (r["exposed_comm_frac"] + r["idle_frac"]) * r["step_time_us"] / 1e3 for r in shares
    }
    assert summed(kind, "run_id", "ms") == pytest.approx(
        {k: v for k, v in expected.items() if v > 0}, rel=1e-6
    )
    exposed = {r["run_id"]: r["exposed_comm_frac"] * r["step_time_us"] / 1e3 for r in shares}
    chart = waits.collective_chart(waits.collective_rows(con, study))
    if kit.empty_reason(chart) is None:
        by_collective = summed(chart_rows(chart), "run_id", "ms")
        assert by_collective == pytest.approx({k: exposed[k] for k in by_collective}, rel=1e-6)
        assert {k for k, v in exposed.items() if v > 0} == set(by_collective)


def test_scaling_charts_draw_one_point_per_run_from_scale_points(con) -> None:
    expected = {
        r["run_id"]: r
        for r in view(
            con,
            "SELECT run_id, tokens_per_s, tokens_per_s_per_device, scaling_efficiency FROM scale_points "
            "WHERE study = $1 AND tokens_per_s IS NOT NULL",
            STUDY,
        )
    }
    assert REPEAT in expected
    for chart in (
        scaling.throughput_chart(con, STUDY),
        scaling.per_device_chart(con, STUDY),
        scaling.efficiency_chart(con, STUDY),
    ):
        data = [r for r in chart_rows(chart) if "run_id" in r]  # not the 80 % / 50 % rules' rows
        assert sorted(r["run_id"] for r in data) == sorted(expected)  # one row, one point, per run
        for row in data:
            want = expected[row["run_id"]]
            for column in ("tokens_per_s", "tokens_per_s_per_device", "scaling_efficiency"):
                assert row[column] == pytest.approx(want[column]), (row["run_id"], column)
    marginal = scaling.efficiency_chart(con, STUDY).to_dict()["hconcat"][1]
    assert marginal["encoding"]["xOffset"]["field"] == "run_id"  # bars side by side, never stacked
    assert marginal["encoding"]["y"]["stack"] is None


def test_scaling_charts_without_throughput_say_why(con) -> None:
    for chart in (
        scaling.throughput_chart(con, UNRELATED_STUDY),
        scaling.efficiency_chart(con, UNRELATED_STUDY),
    ):
        assert kit.empty_reason(chart) == scaling.NO_THROUGHPUT


def test_bus_bandwidth_lines_are_per_run_and_equal_collective_instances(con) -> None:
    expected = {
        (r["run_id"], r["op"], r["bytes"]): r["busbw_gbps"]
        for r in view(
            con,
            "SELECT run_id, op, bytes, median(busbw_gbps) AS busbw_gbps FROM collective_instances "
            "WHERE study = $1 AND busbw_gbps IS NOT NULL AND bytes > 0 GROUP BY ALL",
            STUDY,
        )
    }
    chart = collectives.busbw_chart(con, STUDY)
    data = {(r["run_id"], r["op"], r["bytes"]): r["busbw_gbps"] for r in chart_rows(chart)}
    assert data == pytest.approx(expected)
    assert any(key[0] == REPEAT for key in data)
    encoding = chart.to_dict()["spec"]["encoding"]
    assert encoding["detail"]["field"] == "run_id"
    # the legend tells the collectives apart by shape; the dash legend (all black dots) is off
    assert encoding["shape"]["field"] == "op" and encoding["strokeDash"]["legend"] is None


@BOTH
def test_rank_heatmap_cells_are_step_breakdown_windows_on_one_colour_scale(con, study: str) -> None:
    chart = ranks.rank_heatmap_chart(con, study)
    data = {(r["run_id"], r["rank"], r["step"]): r["step_ms"] for r in chart_rows(chart)}
    expected = {
        (r["run_id"], r["rank"], r["step"]): r["window_us"] / 1e3
        for r in view(
            con,
            "WITH largest AS (SELECT strategy, max(world_size) AS world_size FROM runs WHERE study = $1 "
            "GROUP BY strategy) SELECT b.run_id, b.rank, b.step, b.window_us FROM step_breakdown b "
            "JOIN runs r USING (study, run_id) JOIN largest l ON l.strategy IS NOT DISTINCT FROM r.strategy "
            "AND l.world_size = r.world_size WHERE b.study = $1 AND b.step IS NOT NULL",
            study,
        )
    }
    assert data == pytest.approx(expected)
    assert "color" not in chart.to_dict().get("resolve", {}).get("scale", {})


@BOTH
def test_top_kernels_panels_are_per_run_and_equal_top_kernels(con, study: str) -> None:
    chart = kernels.top_kernels_chart(con, study)
    data = chart_rows(chart)
    expected = view(
        con,
        "SELECT run_id, name, us_per_rank FROM top_kernels WHERE study = $1 AND time_rank <= $2",
        study,
        kernels.TOP,
    )
    assert {(r["run_id"], r["name"]): r["ms_per_rank"] for r in data} == pytest.approx(
        {(r["run_id"], r["name"]): r["us_per_rank"] / 1e3 for r in expected}
    )
    panels = {(r["panel"], r["run_id"]) for r in data}
    assert len(panels) == len({p for p, _ in panels}) == len({r["run_id"] for r in expected})
    assert chart.to_dict()["facet"]["field"] == "panel"


def test_projected_throughput_is_the_projections_view_per_run(con) -> None:
    chart = projection.throughput_chart(con, STUDY)
    data = chart_rows(chart)
    curves = {
        (r["curve"], r["world_size"]): r["tokens_per_s_per_device"]
        for r in data
        if r["source"] == "projected"
    }
    expected = {
        (r["run_id"], r["world_size"]): r["tokens_per_s_per_device"]
        for r in view(
            con,
            "SELECT run_id, world_size, tokens_per_s_per_device FROM projections "
            "WHERE study = $1 AND tokens_per_s_per_device > 0",
            STUDY,
        )
    }
    assert curves == pytest.approx(expected, rel=1e-3)  # the chart keeps 4 significant digits
    assert any(curve == REPEAT for curve, _ in curves)
    dots = sorted(r["curve"] for r in data if r["source"] == "measured")
    assert dots == sorted(step_ms(con, STUDY))  # one measured dot per run


def test_projected_breakdown_has_no_empty_columns(con) -> None:
    spec = projection.breakdown_chart(con, STUDY).to_dict()
    assert spec["resolve"]["scale"]["x"] == "independent"


def test_no_power_is_a_chart_that_says_why(con, dev_warehouse: Path) -> None:
    chart = power.power_chart(con, STUDY)
    reason = kit.empty_reason(chart)
    assert reason is not None and reason.startswith("No power was captured for this study")
    assert chart.to_dict()["data"]["values"] == [{"reason": reason}]
    with open_warehouse(dev_warehouse) as measured:
        rows = chart_rows(power.power_chart(measured, "llama2-160m on H100, ddp vs fsdp"))
        expected = view(
            measured,
            "SELECT run_id, avg_power_w_per_device, tokens_per_j FROM scale_points "
            "WHERE avg_power_w_per_device IS NOT NULL",
        )
    for column in ("avg_power_w_per_device", "tokens_per_j"):
        assert {r["run_id"]: r[column] for r in rows} == pytest.approx(
            {r["run_id"]: r[column] for r in expected}
        )


def test_every_chart_function_says_why_rather_than_returning_none(con) -> None:
    charts = [
        breakdown.step_breakdown_chart(breakdown.breakdown_rows(con, "no such study")),
        waits.kind_chart(waits.kind_rows(con, "no such study")),
        waits.collective_chart(waits.collective_rows(con, "no such study")),
        scaling.throughput_chart(con, "no such study"),
        scaling.per_device_chart(con, "no such study"),
        scaling.efficiency_chart(con, "no such study"),
        projection.throughput_chart(con, "no such study"),
        projection.breakdown_chart(con, "no such study"),
        power.power_chart(con, "no such study"),
        collectives.busbw_chart(con, "no such study"),
        ranks.rank_heatmap_chart(con, "no such study"),
        kernels.top_kernels_chart(con, "no such study"),
    ]
    for chart in charts:
        assert chart is not None and kit.empty_reason(chart), chart


def test_headline_says_each_crossing_once_against_the_strategys_own_baseline(con) -> None:
    facts = {f.label: f.text for f in headline(con, STUDY)}
    efficiency = facts["Scaling efficiency"]
    own = {
        r["run_id"]: r["strategy_scaling_efficiency"]
        for r in view(
            con, "SELECT run_id, strategy_scaling_efficiency FROM scale_points WHERE study = $1", STUDY
        )
    }
    # fsdp-ws2 is below both 80 % and 50 % of fsdp-ws1: one clause, under 50 %
    assert (
        f"fsdp against its own 1-device run: below 50% from 2 devices ({own['fsdp-ws2']:.0%})" in efficiency
    )
    assert "below 80% from 2 devices (35%)" not in efficiency
    # ddp is measured against ddp-ws1, not against the study's best 1-device run (fsdp-ws1)
    assert f"ddp against its own 1-device run: below 80% from 2 devices ({own['ddp-ws2']:.0%})" in efficiency
    assert own["ddp-ws2"] == pytest.approx(own[REPEAT])
    assert (
        "Measured more than once, each run shown on its own: ddp on 2 devices (2 runs)."
        in facts["Scale points"]
    )
    unrelated = {f.label: f.text for f in headline(con, UNRELATED_STUDY)}["Scale points"]
    assert f"{len(UNRELATED)} runs name no strategy" in unrelated and "more than once" not in unrelated
