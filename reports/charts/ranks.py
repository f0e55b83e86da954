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
       b.exposed_comm_us / 1e3 AS exposed_comm_ms, b.idle_us / 1e3 AS idle_ms
FROM step_breakdown b
JOIN runs r USING (study, run_id)
JOIN largest l ON l.strategy IS NOT DISTINCT FROM r.strategy AND l.world_size = r.world_size
WHERE b.study = $1 AND b.step IS NOT NULL
ORDER BY r.strategy, b.rank, b.step
"""


def rank_heatmap_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin | None:
    """Heatmap of step time (ms) by rank and step; None when the study has no steps."""
    rows = frame(con, QUERY, study)
    if rows.is_empty():
        return None
    ranks = rows["rank"].n_unique()
    # Not filtered by the strategy selector: each run has its own colour scale, and an emptied
    # facet's scale would have no extent. The panels are labelled by run instead.
    cells = (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X("step:O", title="step", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("rank:O", title="rank", axis=alt.Axis(labelOverlap=True)),
            color=alt.Color("step_ms:Q", title="step ms", scale=alt.Scale(scheme="orangered", zero=False)),
            tooltip=[
                alt.Tooltip("run_id:N", title="run"),
                "rank:O",
                "step:O",
                alt.Tooltip("step_ms:Q", format=".2f", title="step ms"),
                alt.Tooltip("exposed_comm_ms:Q", format=".2f", title="exposed comm ms"),
                alt.Tooltip("idle_ms:Q", format=".2f", title="idle ms"),
            ],
        )
        .properties(width=kit.WIDTH * 0.6, height=min(max(14 * ranks, 60), 420))
    )
    facet = alt.Column("run_id:N", title=None, header=alt.Header(labelFontSize=12))
    return kit.with_strategy_signal(
        cells.facet(column=facet).resolve_scale(y="independent", color="independent")
    )
