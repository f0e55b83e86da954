"""The section "What the step waits for": its bars split the breakdown's parts exactly, its sentence."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from support import devwarehouse as dev
from tracehouse.reports.charts import breakdown as charts_breakdown
from tracehouse.reports.charts import waits as charts_waits
from tracehouse.reports.sections import waits_section
from tracehouse.reports.source import frame, open_warehouse

STUDY = "tiny-cpu-gloo"
pytestmark = pytest.mark.slow  # the sample warehouse is a real ingest


@pytest.fixture(scope="module")
def con(sample_warehouse: Path):
    connection = open_warehouse(sample_warehouse)
    yield connection
    connection.close()


def _per_run(rows, column: str = "ms") -> dict[str, float]:
    summed = rows.group_by("run_id").agg(pl.col(column).sum())
    return dict(zip(summed["run_id"], summed[column], strict=True))


def test_collective_bars_add_up_to_the_breakdowns_exposed_communication(con) -> None:
    parts = charts_breakdown.breakdown_rows(con, STUDY)
    exposed = _per_run(parts.filter(part="exposed communication"))
    got = _per_run(charts_waits.collective_rows(con, STUDY))
    assert got and got == pytest.approx({run: ms for run, ms in exposed.items() if ms > 0})
    # every collective of a collected run knows its dimension, op and phase
    assert not any("unknown" in c for c in charts_waits.collective_rows(con, STUDY)["collective"])


def test_kind_bars_add_up_to_exposed_communication_plus_idle(con) -> None:
    parts = charts_breakdown.breakdown_rows(con, STUDY)
    want = _per_run(parts.filter(parts["part"].is_in(["exposed communication", "idle"])))
    rows = charts_waits.kind_rows(con, STUDY)
    assert _per_run(rows) == pytest.approx(want)
    # CPU runs: idle has no cause; the collected collectives all match across ranks
    assert set(rows["kind"]) <= {
        "comm: waiting for slower ranks",
        "comm: transfer",
        "idle: no cause (CPU run)",
    }
    assert "comm: waiting for slower ranks" in set(rows["kind"])


def test_the_headline_sentence_names_the_largest_scale_point(con) -> None:
    top = frame(
        con,
        "SELECT run_id, world_size, exposed_comm_frac, idle_frac FROM scale_points WHERE study = $1 "
        "ORDER BY world_size DESC, exposed_comm_frac DESC LIMIT 1",
        STUDY,
    ).row(0, named=True)
    collective = frame(
        con,
        "SELECT op, parallel_dim, phase, exposed_frac, "
        "exposed_wait_us_per_step / exposed_us_per_step AS wait "
        "FROM exposed_comm_by_collective WHERE study = $1 AND run_id = $2 ORDER BY exposed_frac DESC LIMIT 1",
        STUDY,
        top["run_id"],
    ).row(0, named=True)
    share = round(100 * collective["exposed_frac"] / top["exposed_comm_frac"])
    assert charts_waits.headline_sentence(con, STUDY) == (
        f"At {top['world_size']} devices ({top['run_id']}) {round(100 * top['exposed_comm_frac'])} % of the "
        f"step is exposed communication, {share} % of it {collective['parallel_dim']} {collective['op']} "
        f"in the {collective['phase']} pass, {round(100 * collective['wait'])} % of that waiting for slower "
        f"ranks; {round(100 * top['idle_frac'])} % is idle."
    )


def test_a_warehouse_without_the_attribution_says_so(dev_warehouse: Path) -> None:
    connection = open_warehouse(dev_warehouse)  # fabricated by hand, before these views existed
    try:
        section = waits_section(connection, dev.STUDY)
    finally:
        connection.close()
    assert section.figures == [] and "rerun tracehouse ingest" in section.intro
