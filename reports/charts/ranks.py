"""Stragglers: per-rank step time at the largest scale point of each strategy."""

from __future__ import annotations

import altair as alt
import duckdb
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame

QUERY = """
WITH largest AS (
    SELECT strategy, max(world_size) AS world_size FROM runs WHERE study = $1 GROUP BY strategy
)
SELECT coalesce(r.strategy, 'unspecified') AS strategy, b.run_id, r.world_size, b.rank, b.step,
       b.window_us / 1e3 AS step_ms,
       b.window_us / median(b.window_us) OVER (PARTITION BY b.run_id) - 1 AS vs_median,
       b.exposed_comm_us / 1e3 AS exposed_comm_ms, b.idle_us / 1e3 AS idle_ms
FROM step_breakdown b
JOIN runs r USING (study, run_id)
JOIN largest l ON l.strategy IS NOT DISTINCT FROM r.strategy AND l.world_size = r.world_size
WHERE b.study = $1 AND b.step IS NOT NULL
ORDER BY r.strategy, b.run_id, b.rank, b.step
"""
GRAIN = "One panel per run (each strategy's largest), one cell per rank and step, one colour scale."


def rank_heatmap_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """Heatmap of step time (ms) by rank and step."""
    rows = frame(con, QUERY, study)
    if rows.is_empty():
        return kit.nothing_to_draw("No rank of this study has profiler steps.")
    ranks = rows["rank"].n_unique()
    # One colour scale for every panel: each step against its own run's median step, so a slow
    # rank stands out the same in a 50 ms run and in a 300 ms one.
    cells = (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("step:O", title="step", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("rank:O", title="rank", axis=alt.Axis(labelOverlap=True)),
            color=alt.Color(
                "vs_median:Q",
                title="vs the run's median step",
                scale=alt.Scale(scheme="blueorange", domainMid=0),
                legend=alt.Legend(format="+.0%"),
            ),
            tooltip=[
                alt.Tooltip("run_id:N", title="run"),
                "rank:O",
                "step:O",
                alt.Tooltip("step_ms:Q", format=".2f", title="step ms"),
                alt.Tooltip("vs_median:Q", format="+.1%", title="vs the run's median step"),
                alt.Tooltip("exposed_comm_ms:Q", format=".2f", title="exposed comm ms"),
                alt.Tooltip("idle_ms:Q", format=".2f", title="idle ms"),
            ],
        )
        .properties(width=kit.WIDTH * 0.6, height=min(max(14 * ranks, 60), 420))
    )
    facet = alt.Column("run_id:N", title=None, header=alt.Header(labelFontSize=12))
    panels = cells.facet(column=facet).resolve_scale(y="independent")
    return kit.with_strategy_signal(kit.only_chosen_strategy(panels))
