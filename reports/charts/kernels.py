"""The kernels (or, on CPU runs, ops) that take the most time at each scale point."""

from __future__ import annotations

import altair as alt
import duckdb
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame, has_relation

TOP = 8
# Until the SQL layer has a per-run kernel/op totals view (requested), read the raw events table:
# GPU runs rank device events (kernels, memcpy, memset); CPU runs rank cpu_op inclusive time.
QUERY = """
WITH per_run AS (
    SELECT run_id, bool_or(kind IN ('kernel', 'memcpy', 'memset')) AS has_gpu, count(DISTINCT rank) AS ranks
    FROM events WHERE study = $1 GROUP BY run_id
), totals AS (
    SELECT e.run_id, e.kind, e.name, count(*) AS calls,
           sum(e.dur_ns) / 1e6 / any_value(p.ranks) AS ms_per_rank
    FROM events e JOIN per_run p USING (run_id)
    WHERE e.study = $1 AND e.dur_ns > 0
      AND (CASE WHEN p.has_gpu THEN e.kind IN ('kernel', 'memcpy', 'memset') ELSE e.kind = 'cpu_op' END)
    GROUP BY e.run_id, e.kind, e.name
)
SELECT coalesce(r.strategy, 'unspecified') AS strategy, t.run_id, r.world_size, t.kind, t.name,
       t.calls, t.ms_per_rank,
       coalesce(r.strategy, '') || ' · ' || r.world_size || ' devices' AS scale_point,
       dense_rank() OVER (ORDER BY r.strategy, r.world_size) AS panel
FROM totals t JOIN runs r ON r.study = $1 AND r.run_id = t.run_id
QUALIFY row_number() OVER (PARTITION BY t.run_id ORDER BY t.ms_per_rank DESC, t.name) <= {top}
ORDER BY panel, t.ms_per_rank DESC
"""


def top_kernels_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin | None:
    """Horizontal bars of the top kernels/ops by time per rank, one panel per scale point."""
    if not has_relation(con, "events"):
        return None
    rows = frame(con, QUERY.format(top=TOP), study)
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
