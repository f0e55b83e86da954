"""The key chart: where a step's time goes, per scale point and strategy."""

from __future__ import annotations

import altair as alt
import duckdb
import polars as pl
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame

# scale_points gives each part as a fraction of the run's step time (slowest rank, median step);
# the bar shows those fractions of that step time, in ms.
# One bar per run, never a sum over runs: a repeat of a strategy and size is a bar of its own.
QUERY = f"""
SELECT coalesce(r.strategy, 'unspecified') AS strategy, s.world_size, s.run_id,
       {kit.run_label_sql()} AS run_label,
       row_number() OVER (ORDER BY s.world_size, s.run_id) AS run_order,
       s.step_time_us / 1e3 AS step_ms,
       s.compute_frac, s.exposed_comm_frac, s.other_frac, s.idle_frac
FROM scale_points s JOIN runs r USING (study, run_id)
WHERE s.study = $1 AND s.compute_frac IS NOT NULL
ORDER BY r.strategy, s.world_size, s.run_id
"""
GRAIN = "One bar per run (a repeat is a bar of its own), labelled run · devices; never a sum over runs."
NO_STEP = "No run of this study has a measured step."

FRACTIONS = dict(
    zip(kit.PARTS, ("compute_frac", "exposed_comm_frac", "other_frac", "idle_frac"), strict=True)
)


def breakdown_rows(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """One row per (run, part) with the part's share of the step and its ms."""
    wide = frame(con, QUERY, study)
    parts = [
        wide.select(
            "strategy",
            "world_size",
            "run_id",
            "run_label",
            "run_order",
            "step_ms",
            pl.lit(part).alias("part"),
            pl.lit(order).alias("part_order"),
            pl.col(column).alias("share"),
            (pl.col(column) * pl.col("step_ms")).alias("ms"),
        )
        for order, (part, column) in enumerate(FRACTIONS.items())
    ]
    return pl.concat(parts).sort("strategy", "run_order", "part_order")


def _stacked_bars(rows: pl.DataFrame, y: alt.Y, tooltip: list, height: int) -> alt.Chart:
    """Bars per scale point, stacked compute / exposed comm / other / idle in a fixed order."""
    return (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=kit.run_x(),
            y=y,
            color=kit.part_colour(),
            order=alt.Order("part_order:Q", sort="ascending"),
            tooltip=tooltip,
        )
        .properties(width=alt.Step(34), height=height)
    )


def _by_strategy(bars: alt.Chart) -> alt.TopLevelMixin:
    """One panel per strategy, each with only its own runs on its x axis (no empty columns)."""
    panels = bars.facet(column=alt.Column("strategy:N", title=None, header=alt.Header(labelFontSize=13)))
    return kit.with_strategy_signal(kit.only_chosen_strategy(panels.resolve_scale(x="independent")))


def step_breakdown_chart(rows: pl.DataFrame) -> alt.TopLevelMixin:
    """Stacked bars: compute / exposed communication / other / idle ms per step, one bar per run."""
    if rows.is_empty():
        return kit.nothing_to_draw(NO_STEP)
    bars = _stacked_bars(
        rows,
        alt.Y("sum(ms):Q", title="ms per step", stack="zero"),
        [
            alt.Tooltip("run_id:N", title="run"),
            alt.Tooltip("part:N"),
            alt.Tooltip("ms:Q", format=".2f", title="ms"),
            alt.Tooltip("share:Q", format=".1%", title="share of step"),
            alt.Tooltip("step_ms:Q", format=".2f", title="step ms"),
        ],
        kit.HEIGHT,
    )
    return _by_strategy(bars).properties(
        title="Where each step's time goes (median step of the slowest rank)"
    )


def breakdown_share_chart(rows: pl.DataFrame) -> alt.TopLevelMixin:
    """The same split as shares of the step (100 % bars), to compare runs at a glance."""
    if rows.is_empty():
        return kit.nothing_to_draw(NO_STEP)
    bars = _stacked_bars(
        rows,
        alt.Y("sum(share):Q", title="share of step", stack="normalize", axis=alt.Axis(format="%")),
        [alt.Tooltip("run_id:N", title="run"), "part:N", alt.Tooltip("share:Q", format=".1%")],
        160,
    )
    return _by_strategy(bars)
