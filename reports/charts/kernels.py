"""The kernels (or, on CPU runs, ops) that take the most time in each run."""

from __future__ import annotations

import altair as alt
import duckdb
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame, has_relation

TOP = 8
# top_kernels ranks each run's kernel (GPU) or op (CPU: self time) names by time; the chart keeps
# the first TOP of each run, one panel per run: names of different runs are never pooled.
QUERY = f"""
SELECT coalesce(r.strategy, 'unspecified') AS strategy, k.run_id, r.world_size, k.kind, k.name,
       coalesce(k.class, 'op (self time)') AS class,
       k.calls, k.us_per_rank / 1e3 AS ms_per_rank, k.time_rank,
       {kit.run_label_sql("k.run_id", "r.world_size")} AS panel,
       dense_rank() OVER (ORDER BY r.strategy, r.world_size, k.run_id) AS panel_order
FROM top_kernels k JOIN runs r USING (study, run_id)
WHERE k.study = $1 AND k.time_rank <= $2
ORDER BY panel_order, k.time_rank
"""
GRAIN = (
    f"One panel per run, its top {TOP} names by time per rank over the whole trace; "
    "ops of CPU runs by self time (a nested op counts once)."
)
CLASS_COLOURS = {
    "compute": kit.PART_COLOURS[0],
    "comm": kit.PART_COLOURS[1],
    "memory": kit.PART_COLOURS[2],
    "op (self time)": "#72b7b2",
}


def top_kernels_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """Horizontal bars of the top kernels/ops by time per rank, one panel per run."""
    if not has_relation(con, "top_kernels"):
        return kit.nothing_to_draw("This warehouse has no top_kernels view: rerun tracehouse ingest.")
    rows = frame(con, QUERY, study, TOP)
    if rows.is_empty():
        return kit.nothing_to_draw("No events are stored for this study.")
    present = [c for c in CLASS_COLOURS if c in set(rows["class"].to_list())]  # the legend lists only these
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X("ms_per_rank:Q", title="ms per rank (whole trace)"),
            y=alt.Y(
                "name:N", sort=alt.EncodingSortField("time_rank"), title=None, axis=alt.Axis(labelLimit=240)
            ),
            color=alt.Color(
                "class:N",
                title="class",
                scale=alt.Scale(domain=present, range=[CLASS_COLOURS[c] for c in present]),
            ),
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
    facet = alt.Facet("panel:N", title=None, sort=alt.EncodingSortField("panel_order", op="min"))
    # Each run's own ms scale, except where the page's strategy picker can empty panels: Vega
    # keeps an emptied panel's quantitative scale, with no extent (a console warning).
    x_scale = "shared" if rows["strategy"].n_unique() > 1 else "independent"
    chart = bars.facet(facet, columns=2).resolve_scale(y="independent", x=x_scale)
    return kit.with_strategy_signal(kit.only_chosen_strategy(chart))
