"""The kernels (or, on CPU runs, ops) that take the most time at each scale point."""

from __future__ import annotations

import altair as alt
import duckdb
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame, has_relation

TOP = 8
# top_kernels ranks each run's kernel (GPU) or op (CPU) names by time; the chart keeps the first TOP.
QUERY = """
SELECT coalesce(r.strategy, 'unspecified') AS strategy, k.run_id, r.world_size, k.kind, k.name,
       k.calls, k.us_per_rank / 1e3 AS ms_per_rank,
       coalesce(r.strategy, '') || ' · ' || r.world_size || ' devices' AS scale_point,
       dense_rank() OVER (ORDER BY r.strategy, r.world_size) AS panel
FROM top_kernels k JOIN runs r USING (study, run_id)
WHERE k.study = $1 AND k.time_rank <= $2
ORDER BY panel, k.us_per_rank DESC, k.run_id, k.time_rank
"""


def top_kernels_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin | None:
    """Horizontal bars of the top kernels/ops by time per rank, one panel per scale point."""
    if not has_relation(con, "top_kernels"):
        return None
    rows = frame(con, QUERY, study, TOP)
    if rows.is_empty():
        return None
    bars = (
        kit.only_chosen_strategy(alt.Chart(rows))
        .mark_bar()
        .encode(
            x=alt.X("ms_per_rank:Q", title="ms per rank (whole trace)"),
            y=alt.Y("name:N", sort="-x", title=None, axis=alt.Axis(labelLimit=260)),
            color=alt.Color("kind:N", title="kind", scale=alt.Scale(scheme="set2")),
            tooltip=[
                alt.Tooltip("run_id:N", title="run"),
                alt.Tooltip("name:N"),
                "kind:N",
                alt.Tooltip("calls:Q", format=",d"),
                alt.Tooltip("ms_per_rank:Q", format=",.2f", title="ms per rank"),
            ],
        )
        .properties(width=200, height=alt.Step(14))
    )
    facet = alt.Facet("scale_point:N", title=None, sort=alt.EncodingSortField("panel", op="min"))
    chart = bars.facet(facet, columns=2).resolve_scale(y="independent")
    return kit.with_strategy_signal(chart)
