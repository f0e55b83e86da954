"""Collective bus bandwidth against message size, one line per scale point."""

from __future__ import annotations

import altair as alt
import duckdb
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame

# One point per (run, op, message size): the median over matched instances and ranks, to plot.
QUERY = """
SELECT coalesce(r.strategy, 'unspecified') AS strategy, c.run_id, r.world_size, c.op, c.bytes,
       median(c.busbw_gbps) AS busbw_gbps, median(c.transfer_us) AS transfer_us, count(*) AS n
FROM collective_instances c JOIN runs r USING (study, run_id)
WHERE c.study = $1 AND c.busbw_gbps IS NOT NULL AND c.bytes > 0
GROUP BY ALL
ORDER BY strategy, r.world_size, c.run_id, c.op, c.bytes
"""
GRAIN = (
    "One line per run and collective, one point per message size: the median over the run's matched "
    "instances and ranks (a repeat is a line of its own)."
)
NOTHING = "No matched collective instance with a known message size in this study."


COLLECTIVE_LEGEND = alt.Legend(
    symbolType="stroke", symbolStrokeColor="#333", symbolStrokeWidth=2, symbolSize=300
)


def busbw_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """Bus bandwidth (GB/s) vs message size on log2 axes, one line per run and collective."""
    rows = frame(con, QUERY, study)
    if rows.is_empty():
        return kit.nothing_to_draw(NOTHING)
    lines = (
        alt.Chart(rows)
        .mark_line(point=True)
        .encode(
            x=kit.bytes_x(),
            y=alt.Y("busbw_gbps:Q", title="bus bandwidth GB/s"),
            color=alt.Color("world_size:O", title="devices", scale=alt.Scale(scheme="viridis")),
            # each collective has its own dash and point shape; the legend shows the shapes (a
            # dash legend on a line with points draws every entry as the same black dot)
            strokeDash=alt.StrokeDash("op:N", legend=None),
            shape=alt.Shape("op:N", title="collective", legend=alt.Legend(symbolFillColor="#333")),
            detail="run_id:N",
            tooltip=[
                alt.Tooltip("run_id:N", title="run"),
                "op:N",
                alt.Tooltip("bytes:Q", format=",d"),
                alt.Tooltip("busbw_gbps:Q", format=".2f", title="busbw GB/s"),
                alt.Tooltip("transfer_us:Q", format=",.1f", title="transfer µs"),
                alt.Tooltip("n:Q", title="instances"),
            ],
        )
        .properties(width=kit.WIDTH, height=kit.HEIGHT)
    )
    panels = lines.facet(column=alt.Column("strategy:N", title=None))
    return kit.with_strategy_signal(kit.only_chosen_strategy(panels))
