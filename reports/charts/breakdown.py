"""The key chart: where a step's time goes, per scale point and strategy."""

from __future__ import annotations

import altair as alt
import duckdb
import polars as pl
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame

# scale_points gives each part as a fraction of the run's step time (slowest rank, median step);
# the bar shows those fractions of that step time, in ms.
QUERY = """
SELECT coalesce(r.strategy, 'unspecified') AS strategy, s.world_size, s.run_id,
       s.step_time_us / 1e3 AS step_ms,
       s.compute_frac, s.exposed_comm_frac, s.other_frac, s.idle_frac
FROM scale_points s JOIN runs r USING (study, run_id)
WHERE s.study = $1 AND s.compute_frac IS NOT NULL
ORDER BY r.strategy, s.world_size
"""

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
            "step_ms",
            pl.lit(part).alias("part"),
            pl.lit(order).alias("part_order"),
            pl.col(column).alias("share"),
            (pl.col(column) * pl.col("step_ms")).alias("ms"),
        )
        for order, (part, column) in enumerate(FRACTIONS.items())
    ]
    return pl.concat(parts).sort("strategy", "world_size", "part_order")


def _stacked_bars(rows: pl.DataFrame, y: alt.Y, tooltip: list, height: int) -> alt.Chart:
    """Bars per scale point, stacked compute / exposed comm / other / idle in a fixed order."""
    return (
        kit.only_chosen_strategy(alt.Chart(rows))
        .mark_bar()
        .encode(
            x=alt.X("world_size:O", title="devices", axis=alt.Axis(labelAngle=0)),
            y=y,
            color=kit.part_colour(),
            order=alt.Order("part_order:Q", sort="ascending"),
            tooltip=tooltip,
        )
        .properties(width=kit.WIDTH, height=height)
    )


def step_breakdown_chart(rows: pl.DataFrame) -> alt.TopLevelMixin | None:
    """Stacked bars: compute / exposed communication / other / idle ms per step, per scale point."""
    if rows.is_empty():
        return None
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
    return kit.with_strategy_signal(
        bars.facet(column=alt.Column("strategy:N", title=None, header=alt.Header(labelFontSize=13)))
    ).properties(title="Where each step's time goes (median step of the slowest rank)")


def breakdown_share_chart(rows: pl.DataFrame) -> alt.TopLevelMixin | None:
    """The same split as shares of the step (100 % bars), to compare scale points at a glance."""
    if rows.is_empty():
        return None
    bars = _stacked_bars(
        rows,
        alt.Y("sum(share):Q", title="share of step", stack="normalize", axis=alt.Axis(format="%")),
        [alt.Tooltip("run_id:N", title="run"), "part:N", alt.Tooltip("share:Q", format=".1%")],
        160,
    )
    return kit.with_strategy_signal(bars.facet(column=alt.Column("strategy:N", title=None)))
