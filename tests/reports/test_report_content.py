"""The report's numbers and words, checked against values computed by hand from the fabricated study."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from support import devwarehouse as dev
from support.hostile import HOSTILE, hostile_run
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.reports.charts import breakdown as charts_breakdown
from tracehouse.reports.charts import kernels as charts_kernels
from tracehouse.reports.charts import kit
from tracehouse.reports.charts import power as charts_power
from tracehouse.reports.charts import scaling as charts_scaling
from tracehouse.reports.headline import headline
from tracehouse.reports.source import open_warehouse


@pytest.fixture
def con(dev_warehouse: Path):
    connection = open_warehouse(dev_warehouse)
    yield connection
    connection.close()


def test_breakdown_bars_split_the_step_time_by_part(con) -> None:
    rows = charts_breakdown.breakdown_rows(con, dev.STUDY)
    ddp16 = {r["part"]: r["ms"] for r in rows.filter(run_id="ddp-w16").iter_rows(named=True)}
    # ddp on 16 devices: compute 158 ms / 16, exposed 2.5 ms x log2(16) + 9 ms inter-node,
    # other 1.2 ms, idle 0.8 + 0.15 x 16 ms; the step is their sum, 33.275 ms.
    assert ddp16 == pytest.approx(
        {"compute": 9.875, "exposed communication": 19.0, "other": 1.2, "idle": 3.2}
    )
    assert rows.height == 4 * len(dev.WORLD_SIZES) * len(dev.STRATEGIES)


def test_headline_names_thresholds_and_what_dominates(con) -> None:
    facts = {f.label: f.text for f in headline(con, dev.STUDY)}
    # efficiency(ddp, 8) = (160.15 / 30.45) / 8 = 0.657; (ddp, 16) = (160.15 / 33.275) / 16 = 0.301
    assert facts["Scaling efficiency"].startswith(
        "ddp against its own 1-device run: below 80% from 8 devices (66%), below 50% from 16 devices (30%)"
    )
    # 19 / 33.275 = 57 % exposed communication at the largest scale point
    assert (
        "ddp on 16 devices (ddp-w16) exposed communication dominates, 57% of a 33.3 ms step"
        in facts["At the largest scale"]
    )
    # best per device: one device, 65536 tokens / 0.16015 s = 409,216 tokens/s
    assert facts["Best throughput per device"].startswith("409,216 tokens/s per device with ddp on 1 device")
    assert "1, 2, 4, 8, 16 devices" in facts["Scale points"]


def test_ideal_line_is_the_smallest_point_grown_linearly(con) -> None:
    rows = charts_scaling.scaling_rows(con, dev.STUDY).filter(strategy="ddp").sort("world_size")
    base = dev.TOKENS_PER_STEP / 0.16015
    assert rows["ideal_tokens_per_s"].to_list() == pytest.approx([base * w for w in dev.WORLD_SIZES])


def test_power_note_summarises_and_keeps_the_manifest_reason_as_detail(
    dev_warehouse_no_power: Path, con
) -> None:
    assert charts_power.power_note(con, dev.STUDY) is None
    with open_warehouse(dev_warehouse_no_power) as other:
        # no power: a chart that says why (never None), the same sentence as the page's note
        chart = charts_power.power_chart(other, dev.STUDY)
        summary = "No power was captured for this study (the run manifests' reason is below)."
        assert kit.empty_reason(chart) == summary == charts_power.power_note(other, dev.STUDY)
        assert chart.to_dict()["data"]["values"] == [{"reason": summary}]
        assert charts_power.power_details(other, dev.STUDY) == [dev.NO_POWER]


def test_a_warehouse_ingested_before_a_view_existed_still_gets_its_chart(tmp_path: Path) -> None:
    wh = tmp_path / "warehouse"
    assert ingest([hostile_run(tmp_path / "run")], wh).failed == []
    with duckdb.connect(str(wh / "tracehouse.duckdb")) as c:  # as an older tracehouse left it
        c.execute("DROP VIEW top_kernels")
        c.execute("DROP VIEW power_coverage")
    with open_warehouse(wh) as con:
        rows = charts_kernels.top_kernels_chart(con, HOSTILE["study"]).to_dict()["datasets"]
        names = {r["name"]: r["ms_per_rank"] for part in rows.values() for r in part}
        # two launches of each kernel on the one rank: 2 x 500 µs and 2 x 200 µs
        assert names == {HOSTILE["kernel"]: 1.0, "ncclDevKernel_AllReduce_Sum_f32_RING_LL": 0.4}
        reason = "<svg onload=\"window.__pwned='power'\">"  # the manifest's power.unavailable_reason
        assert charts_power.power_details(con, HOSTILE["study"]) == [reason]
