"""What the step waits for: exposed communication by collective and by wait vs transfer, idle by cause."""

from __future__ import annotations

import altair as alt
import duckdb
import polars as pl
from tracehouse.reports.charts import kit
from tracehouse.reports.source import columns, frame, has_relation

# Each share is of the run's summed step windows (as the breakdown's); times the step time it is
# that part of the breakdown bar, in ms.
BY_COLLECTIVE = f"""
SELECT coalesce(r.strategy, 'unspecified') AS strategy, s.world_size, s.run_id,
       {kit.run_label_sql()} AS run_label, dense_rank() OVER (ORDER BY s.world_size, s.run_id) AS run_order,
       e.parallel_dim || ' ' || coalesce(e.op, 'unknown op') AS collective,
       e.phase, sum(e.exposed_frac) AS share, sum(e.exposed_frac) * s.step_time_us / 1e3 AS ms
FROM exposed_comm_by_collective e
JOIN scale_points s USING (study, run_id)
JOIN runs r USING (study, run_id)
WHERE e.study = $1 AND e.exposed_frac > 0
GROUP BY strategy, s.world_size, s.run_id, collective, e.phase, s.step_time_us
ORDER BY strategy, world_size, s.run_id, collective, e.phase
"""
WAIT_COLUMNS = (
    "exposed_wait_frac",
    "exposed_transfer_frac",
    "idle_host_wait_frac",
    "idle_device_wait_frac",
    "idle_unknown_frac",
)
BY_KIND = f"""
SELECT coalesce(r.strategy, 'unspecified') AS strategy, s.world_size, s.run_id,
       {kit.run_label_sql()} AS run_label, row_number() OVER (ORDER BY s.world_size, s.run_id) AS run_order,
       s.step_time_us / 1e3 AS step_ms, s.exposed_comm_frac, s.idle_frac,
       s.exposed_wait_frac, s.exposed_transfer_frac,
       s.idle_host_wait_frac, s.idle_device_wait_frac, s.idle_unknown_frac
FROM scale_points s JOIN runs r USING (study, run_id)
WHERE s.study = $1 AND s.compute_frac IS NOT NULL
ORDER BY strategy, s.world_size, s.run_id
"""
# The kinds of waiting, in stacking order, with their colours (exposed communication reds, idle greys).
KINDS = {
    "comm: waiting for slower ranks": "#e45756",
    "comm: transfer": "#ff9d98",
    "comm: not matched across ranks": "#f2cfcc",
    "idle: waiting for the host": "#79706e",
    "idle: launched, not started": "#bab0ac",
    "idle: launch not in trace": "#d8d3d0",
    "idle: no cause (CPU run)": "#ebe8e6",
}
GRAIN = "One bar per run (a repeat is a bar of its own), labelled run · devices; never a sum over runs."
PHASE_SHORT = {"forward": "fwd", "backward": "bwd", "optimizer": "opt", "other": "other"}


def available(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the warehouse has the attribution (a warehouse made before it lacks the views)."""
    return has_relation(con, "exposed_comm_by_collective") and set(WAIT_COLUMNS) <= set(
        columns(con, "scale_points")
    )


def collective_rows(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """One row per (run, dimension + op, phase) with its exposed share of the step and ms."""
    rows = frame(con, BY_COLLECTIVE, study)
    phase = pl.col("phase").replace_strict(PHASE_SHORT, default="unknown phase")
    named = rows.with_columns((pl.col("collective") + " · " + phase).alias("collective"))
    # stacking order: by name (Vega-Lite orders stacks by a quantitative field only)
    return named.with_columns(pl.col("collective").rank("dense").alias("collective_order"))


def kind_rows(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """One row per (run, kind of waiting) with its share of the step and ms."""
    wide = frame(con, BY_KIND, study)
    unmatched = (
        pl.col("exposed_comm_frac")
        - pl.col("exposed_wait_frac").fill_null(0)
        - pl.col("exposed_transfer_frac").fill_null(0)
    )
    no_cause = pl.when(pl.col("idle_host_wait_frac").is_null()).then(pl.col("idle_frac")).otherwise(0.0)
    shares = [
        pl.col("exposed_wait_frac").fill_null(0),
        pl.col("exposed_transfer_frac").fill_null(0),
        pl.max_horizontal(unmatched, pl.lit(0.0)),
        pl.col("idle_host_wait_frac").fill_null(0),
        pl.col("idle_device_wait_frac").fill_null(0),
        pl.col("idle_unknown_frac").fill_null(0),
        no_cause,
    ]
    parts = [
        wide.select(
            "strategy",
            "world_size",
            "run_id",
            "run_label",
            "run_order",
            pl.lit(kind).alias("kind"),
            pl.lit(order).alias("kind_order"),
            share.alias("share"),
            (share * pl.col("step_ms")).alias("ms"),
        )
        for order, (kind, share) in enumerate(zip(KINDS, shares, strict=True))
    ]
    if not parts or wide.is_empty():
        return pl.DataFrame()
    # a share below 1e-9 is float noise of a difference (all matched), not a part worth a bar
    return pl.concat(parts).filter(pl.col("share") > 1e-9).sort("strategy", "run_order", "kind_order")


def _bars(rows: pl.DataFrame, colour: alt.Color, order: alt.Order, tooltip: list) -> alt.TopLevelMixin:
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=kit.run_x(),
            y=alt.Y("sum(ms):Q", title="ms per step", stack="zero"),
            color=colour,
            order=order,
            tooltip=tooltip,
        )
        .properties(width=alt.Step(34), height=kit.HEIGHT)
    )
    # each strategy's panel holds only its own runs: no empty columns
    panels = bars.facet(column=alt.Column("strategy:N", title=None)).resolve_scale(x="independent")
    return kit.with_strategy_signal(kit.only_chosen_strategy(panels))


def collective_chart(rows: pl.DataFrame) -> alt.TopLevelMixin:
    """Exposed communication per step by parallel dimension, op and phase, per scale point."""
    if rows.is_empty():
        return kit.nothing_to_draw("No run of this study has exposed communication.")
    return _bars(
        rows,
        alt.Color("collective:N", title="dimension, op, phase", scale=alt.Scale(scheme="tableau20")),
        alt.Order("collective_order:Q", sort="ascending"),
        [
            alt.Tooltip("run_id:N", title="run"),
            alt.Tooltip("collective:N"),
            alt.Tooltip("ms:Q", format=".2f", title="exposed ms per step"),
            alt.Tooltip("share:Q", format=".1%", title="share of step"),
        ],
    ).properties(title="Exposed communication by collective")


def kind_chart(rows: pl.DataFrame) -> alt.TopLevelMixin:
    """Exposed communication split into wait and transfer, idle split by cause, per scale point."""
    if rows.is_empty():
        return kit.nothing_to_draw("No run of this study has a measured step.")
    return _bars(
        rows,
        alt.Color(
            "kind:N", title="waiting on", scale=alt.Scale(domain=list(KINDS), range=list(KINDS.values()))
        ),
        alt.Order("kind_order:Q", sort="ascending"),
        [
            alt.Tooltip("run_id:N", title="run"),
            alt.Tooltip("kind:N"),
            alt.Tooltip("ms:Q", format=".2f", title="ms per step"),
            alt.Tooltip("share:Q", format=".1%", title="share of step"),
        ],
    ).properties(title="What the waiting is")


def _percent(x: float) -> str:
    return f"{100 * x:.0f} %"


HEADLINE = """
SELECT s.run_id, s.world_size, s.exposed_comm_frac, s.idle_frac, s.idle_host_wait_frac,
       e.op, e.parallel_dim, e.phase, e.exposed_frac, e.exposed_us_per_step, e.exposed_wait_us_per_step
FROM scale_points s
JOIN runs r USING (study, run_id)
LEFT JOIN exposed_comm_by_collective e USING (study, run_id)
WHERE s.study = $1 AND s.exposed_comm_frac IS NOT NULL AND ($2 IS NULL OR r.strategy = $2)
ORDER BY s.world_size DESC, s.exposed_comm_frac DESC, s.run_id, e.exposed_frac DESC NULLS LAST, e.op
LIMIT 1
"""
PHASE_WORDS = {
    "forward": "in the forward pass",
    "backward": "in the backward pass",
    "optimizer": "in the optimizer",
}


def headline_sentence(con: duckdb.DuckDBPyConnection, study: str, strategy: str | None = None) -> str:
    """One sentence on the largest scale point (the one that waits most where several share its size),
    of the study or of one strategy's runs."""
    rows = frame(con, HEADLINE, study, strategy)
    if rows.is_empty():
        return "No run of this study has a measured step."
    r = rows.row(0, named=True)
    devices = "device" if r["world_size"] == 1 else "devices"
    text = (
        f"At {r['world_size']} {devices} ({r['run_id']}) {_percent(r['exposed_comm_frac'])} of the step is "
        "exposed communication"
    )
    if r["op"] is not None and r["exposed_frac"] and r["exposed_comm_frac"] > 0:
        where = PHASE_WORDS.get(r["phase"], "outside any step phase")
        share = r["exposed_frac"] / r["exposed_comm_frac"]
        text += f", {_percent(share)} of it {r['parallel_dim']} {r['op']} {where}"
        if r["exposed_wait_us_per_step"] is not None and r["exposed_us_per_step"]:
            wait = r["exposed_wait_us_per_step"] / r["exposed_us_per_step"]
            text += f", {_percent(wait)} of that waiting for slower ranks"
    text += f"; {_percent(r['idle_frac'])} is idle"
    if r["idle_host_wait_frac"] is not None and r["idle_frac"]:
        text += f", {_percent(r['idle_host_wait_frac'] / r['idle_frac'])} of it waiting for the host"
    return text + "."
