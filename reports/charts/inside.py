"""Inside the step: the ops against their roofline, the critical path across ranks, what holds each step."""

from __future__ import annotations

import altair as alt
import duckdb
import polars as pl
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame, has_relation

TOP_OPS = 10
# The path's timeline is drawn in BINS equal slices of the step per rank: a path holds thousands of
# segments (a host gap and a kernel per op on a CPU rank), far more than a chart's width in pixels.
BINS = 240

# Each run's ops pooled over its steps and ranks: time per rank step window, its share of all the
# run's op time (ops without FLOPs included), FLOPs and bytes summed,
# and the bound as the rate that takes the summed time at the bound (bound_us: the sum of flops over
# bound), so bound_frac is the op's compute efficiency (scale_points.compute_efficiency for one op).
ROOFLINE_QUERY = """
WITH runs_of AS (
    SELECT study, run_id, coalesce(strategy, 'unspecified') AS strategy, world_size,
           {label} AS panel,
           dense_rank() OVER (ORDER BY world_size, strategy, run_id) AS panel_order
    FROM runs s WHERE study = $1
),
windows AS (
    SELECT run_id, count(DISTINCT (step, rank)) AS windows FROM op_breakdown WHERE study = $1 GROUP BY run_id
),
ops AS (
    SELECT run_id, op, sum(calls)::BIGINT AS calls, sum(work_us) AS work_us, sum(flops)::DOUBLE AS flops,
           sum(bytes)::DOUBLE AS bytes,
           sum(flops / bound_tflops / 1e6) FILTER (WHERE bound_tflops IS NOT NULL) AS bound_us,
           count(*) FILTER (WHERE bound_tflops IS NULL AND flops > 0) AS unbounded
    FROM op_breakdown WHERE study = $1 GROUP BY run_id, op
),
shared AS (
    SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY work_us DESC, op) AS time_rank
    FROM (SELECT *, work_us / sum(work_us) OVER (PARTITION BY run_id) AS share_of_op_time FROM ops)
    WHERE flops > 0 AND bytes > 0 AND work_us > 0
)
SELECT r.strategy, o.run_id, r.world_size, r.panel, r.panel_order, o.op, o.calls, o.time_rank,
       o.work_us / w.windows / 1e3 AS ms_per_step,
       o.share_of_op_time,
       o.flops / o.work_us / 1e3 AS achieved_gflops,
       o.flops / o.bytes AS intensity,
       CASE WHEN o.unbounded = 0 THEN o.flops / o.bound_us / 1e3 END AS bound_gflops,
       CASE WHEN o.unbounded = 0 THEN o.bound_us / o.work_us END AS bound_frac
FROM shared o JOIN runs_of r USING (run_id) JOIN windows w USING (run_id)
WHERE o.time_rank <= $2
ORDER BY r.panel_order, o.time_rank
"""
# log axes labelled at each power of ten only (0.01, 0.1, 1, 10, 100, 1k, ...)
DECADES = kit.plain_si_axis(values=[10.0**k for k in range(-6, 10)])
ROOFLINE_GRAIN = (
    f"One panel per run, one point per op: its {TOP_OPS} ops with the most time among those with FLOPs "
    "and bytes, pooled over steps and ranks."
)


def roofline_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """Each run's top ops as points of achieved GFLOP/s against intensity, sized by time, with their bound."""
    if not has_relation(con, "op_breakdown"):
        return kit.nothing_to_draw("This warehouse has no op_breakdown view: rerun tracehouse ingest.")
    rows = frame(con, ROOFLINE_QUERY.format(label=kit.run_label_sql()), study, TOP_OPS)
    if rows.is_empty():
        return kit.nothing_to_draw("No op of this study has FLOPs and bytes (the traces lack shapes).")
    tooltip = [
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("op:N"),
        alt.Tooltip("calls:Q", format=",d"),
        alt.Tooltip("ms_per_step:Q", format=",.3f", title="ms per rank step"),
        alt.Tooltip("share_of_op_time:Q", format=".1%", title="share of the run's op time"),
        alt.Tooltip("intensity:Q", format=",.2f", title="FLOPs per byte"),
        alt.Tooltip("achieved_gflops:Q", format=",.3~f", title="achieved GFLOP/s"),
        alt.Tooltip("bound_gflops:Q", format=",.0f", title="roofline bound GFLOP/s"),
        alt.Tooltip("bound_frac:Q", format=".1%", title="of the bound"),
    ]
    x = alt.X(
        "intensity:Q",
        title="FLOPs per byte (log)",
        scale=alt.Scale(type="log", nice=False, padding=10),
        axis=DECADES,
    )
    y_scale = alt.Scale(type="log", nice=False, padding=10)
    base = alt.Chart(rows).properties(width=kit.WIDTH, height=kit.HEIGHT)
    position = {
        "x": x,
        "y": alt.Y("achieved_gflops:Q", title="achieved GFLOP/s (log)", scale=y_scale, axis=DECADES),
        "size": alt.Size("ms_per_step:Q", title="ms per rank step", scale=alt.Scale(range=[30, 900])),
        "tooltip": tooltip,
    }
    # two layers, not a colour condition: Vega-Lite drops a mark whose colour field is null
    bounded = (
        base.transform_filter("isValid(datum.bound_frac)")
        .mark_circle(opacity=0.8, stroke="#333", strokeWidth=0.5)
        .encode(
            **position,
            color=alt.Color(
                "bound_frac:Q",
                title="of the roofline bound",
                scale=alt.Scale(scheme="redyellowgreen", domain=[0, 1], clamp=True),
                legend=alt.Legend(format=".0%"),
            ),
        )
    )
    unbounded = (
        base.transform_filter("!isValid(datum.bound_frac)")
        .mark_circle(opacity=0.6, color="#8c8c8c", stroke="#333", strokeWidth=0.5)
        .encode(**position)
    )
    # the bound of each op with one: a dash at the rate the roofline allows at its intensity
    bounds = (
        base.transform_filter("isValid(datum.bound_gflops)")
        .mark_tick(color="#333", thickness=2, size=14, orient="horizontal")
        .encode(x=x, y=alt.Y("bound_gflops:Q", scale=y_scale), tooltip=tooltip)
    )
    reach = (
        base.transform_filter("isValid(datum.bound_gflops)")
        .mark_rule(color="#999", strokeDash=[2, 2])
        .encode(x=x, y=alt.Y("achieved_gflops:Q", scale=y_scale), y2="bound_gflops:Q")
    )
    facet = alt.Facet("panel:N", title=None, sort=alt.EncodingSortField("panel_order", op="min"))
    layers = [reach, bounds, unbounded, bounded] if rows["bound_frac"].is_not_null().any() else [unbounded]
    # shared axes: the same op sits at comparable places in every run (and a panel the page's
    # strategy picker empties keeps a valid extent)
    chart = alt.layer(*layers).facet(facet, columns=3).properties(title="Each run's top ops on the roofline")
    return kit.with_strategy_signal(kit.only_chosen_strategy(chart))


# The slowest replayed step of each strategy's largest run(s), cut into BINS slices; per slice and
# rank, the kind of segment that fills most of it, and consecutive slices of one kind as one stretch.
PATH_QUERY = """
WITH largest AS (
    SELECT strategy, max(world_size) AS world_size FROM runs WHERE study = $1 GROUP BY strategy
),
chosen AS (
    SELECT r.run_id, coalesce(r.strategy, 'unspecified') AS strategy, r.world_size,
           arg_max(p.step, p.step_us ORDER BY p.step) AS step
    FROM runs r
    JOIN largest l ON l.strategy IS NOT DISTINCT FROM r.strategy AND l.world_size = r.world_size
    JOIN critical_path p ON p.study = r.study AND p.run_id = r.run_id AND p.kind IS NOT NULL
    WHERE r.study = $1
    GROUP BY ALL
),
segments AS (
    SELECT c.strategy, c.run_id, c.world_size, c.step, p.path_rank, p.step_us, p.rank, p.kind, p.op,
           p.start_us, p.start_us + p.dur_us AS end_us
    FROM chosen c
    JOIN critical_path p ON p.study = $1 AND p.run_id = c.run_id AND p.step IS NOT DISTINCT FROM c.step
    WHERE p.kind IS NOT NULL
),
slices AS (
    SELECT s.*, b.bin,
           least(s.end_us, (b.bin + 1) * s.step_us / $2) - greatest(s.start_us, b.bin * s.step_us / $2)
               AS inside_us
    FROM segments s, (SELECT unnest(range($2)) AS bin) AS b
    WHERE s.kind <> 'wait' AND s.start_us < (b.bin + 1) * s.step_us / $2 AND s.end_us > b.bin * s.step_us / $2
),
op_time AS (
    SELECT strategy, run_id, step, step_us, rank, bin, kind, op, sum(inside_us) AS op_us
    FROM slices GROUP BY ALL
),
binned AS (
    SELECT strategy, run_id, step, step_us, rank, bin, arg_max(kind, kind_us) AS kind, max(kind_us) AS kind_us
    FROM (
        SELECT strategy, run_id, step, step_us, rank, bin, kind, sum(op_us) AS kind_us
        FROM op_time GROUP BY ALL
    )
    GROUP BY ALL
),
-- consecutive slices of one lane held by the same kind make one stretch (one mark)
stretches AS (
    SELECT *, bin - row_number() OVER (PARTITION BY run_id, rank, kind ORDER BY bin) AS stretch
    FROM binned
),
-- the op of that kind with the most time in the stretch names it
stretch_ops AS (
    SELECT run_id, rank, kind, stretch, arg_max(op, op_us) AS op
    FROM (
        SELECT s.run_id, s.rank, s.kind, s.stretch, o.op, sum(o.op_us) AS op_us
        FROM stretches s
        JOIN op_time o ON o.run_id = s.run_id AND o.rank = s.rank AND o.bin = s.bin AND o.kind = s.kind
        GROUP BY ALL
    )
    GROUP BY ALL
)
SELECT s.strategy, s.run_id, s.step, round(s.step_us / 1e3, 4) AS step_ms, 'rank ' || s.rank AS lane, s.rank,
       round(min(s.bin) * s.step_us / $2 / 1e3, 4) AS start_ms,
       round((max(s.bin) + 1) * s.step_us / $2 / 1e3, 4) AS end_ms,
       s.kind, left(any_value(o.op), 80) AS op,
       round(sum(s.kind_us) / (count(*) * s.step_us / $2), 3) AS kind_share
FROM stretches s
LEFT JOIN stretch_ops o USING (run_id, rank, kind, stretch)
GROUP BY s.strategy, s.run_id, s.step, s.step_us, s.rank, s.kind, s.stretch
UNION ALL
-- where the path changes rank: the waiting rank's collective, one slice wide, drawn over the rest
SELECT strategy, run_id, step, round(step_us / 1e3, 4), 'rank ' || rank, rank, round(start_us / 1e3, 4),
       round((start_us + step_us / $2) / 1e3, 4), kind, left(op, 80), 1.0
FROM segments WHERE kind = 'wait'
ORDER BY strategy, run_id, kind = 'wait', rank, start_ms
"""
PATH_GRAIN = (
    f"One panel per strategy's largest run, its slowest replayed step; one lane per rank the path visits, "
    f"the step cut into {BINS} slices, each coloured by the kind of segment that fills most of it."
)
KINDS = (
    ("compute", kit.PART_COLOURS[0]),
    ("transfer", kit.PART_COLOURS[1]),
    ("wait", "#f58518"),
    ("copy", kit.PART_COLOURS[2]),
    ("host", "#54a24b"),
    ("host_gap", "#bab0ac"),
    ("launch_delay", "#eeca3b"),
    ("stream_wait", "#9d755d"),
    ("sync_tail", "#ff9da6"),
    ("residual", "#79706e"),
)


def path_rows(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """The binned critical path of each strategy's largest run's slowest step (empty without stored paths)."""
    if not has_relation(con, "critical_path"):
        return pl.DataFrame()
    return frame(con, PATH_QUERY, study, BINS)


def path_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """The critical path of the slowest step at each strategy's largest scale point, across its ranks."""
    rows = path_rows(con, study)
    if rows.is_empty():
        return kit.nothing_to_draw(
            "No critical path is stored for this study's largest runs: "
            "run tracehouse project on this warehouse."
        )
    # x as a share of the step: one fixed scale for every panel (one the page's strategy picker
    # empties included), each panel named with its step's length
    rows = rows.with_columns(
        (pl.col("start_ms") / pl.col("step_ms")).alias("start_frac"),
        (pl.col("end_ms") / pl.col("step_ms")).alias("end_frac"),
        pl.format("{} · step {} · {} ms", "run_id", "step", pl.col("step_ms").round(1)).alias("panel"),
    )
    present = [k for k, _ in KINDS if k in set(rows["kind"].to_list())]
    colour = alt.Color(
        "kind:N",
        title="on the path",
        scale=alt.Scale(domain=present, range=[c for k, c in KINDS if k in present]),
    )
    chart = (
        alt.Chart(rows)
        .mark_rect()
        .encode(
            x=alt.X(
                "start_frac:Q",
                title="share of the step (replayed)",
                scale=alt.Scale(domain=[0, 1], nice=False),
                axis=alt.Axis(format="%"),
            ),
            x2="end_frac:Q",
            y=alt.Y("lane:N", title=None, sort=alt.EncodingSortField("rank", op="min")),
            color=colour,
            tooltip=[
                alt.Tooltip("run_id:N", title="run"),
                alt.Tooltip("step:O"),
                alt.Tooltip("lane:N", title="rank"),
                alt.Tooltip("start_ms:Q", format=",.2f", title="from ms"),
                alt.Tooltip("end_ms:Q", format=",.2f", title="to ms"),
                alt.Tooltip("kind:N"),
                alt.Tooltip("kind_share:Q", format=".0%", title="share of the stretch"),
                alt.Tooltip("op:N", title="longest op in it"),
            ],
        )
    )
    lanes = rows.group_by("run_id").agg(pl.col("lane").n_unique())["lane"].max()
    chart = (
        chart.properties(width=kit.WIDTH * 2.5, height=alt.Step(22) if lanes > 1 else 40)
        .facet(
            row=alt.Row(
                "panel:N",
                title=None,
                header=alt.Header(labelAngle=0, labelAlign="left", labelFontSize=12),
            )
        )
        .resolve_scale(y="independent")
        .properties(title="Critical path of the slowest step (each strategy's largest run)")
    )
    return kit.with_strategy_signal(kit.only_chosen_strategy(chart))


# Per run: the slowest replayed step's path by kind, the ranks it visits, the run's top op with
# FLOPs by time (a collective's wait or a Python wrapper is no answer to "which op computes") and
# the compute efficiency; the sentences of the section come from these rows.
POINTS_QUERY = """
WITH runs_of AS (
    SELECT study, run_id, coalesce(strategy, 'unspecified') AS strategy, world_size FROM runs WHERE study = $1
),
slowest AS (
    SELECT run_id, arg_max(step, step_us ORDER BY step) AS step, max(step_us) AS step_us
    FROM critical_path WHERE study = $1 AND kind IS NOT NULL GROUP BY run_id
),
path AS (
    SELECT p.run_id, any_value(p.path_rank) AS path_rank,
           list(DISTINCT p.rank ORDER BY p.rank) AS ranks,
           count(*) FILTER (WHERE p.kind = 'wait') AS handovers
    FROM critical_path p JOIN slowest s ON s.run_id = p.run_id AND p.step IS NOT DISTINCT FROM s.step
    WHERE p.study = $1 AND p.kind IS NOT NULL GROUP BY p.run_id
),
kinds AS (
    SELECT p.run_id, list(struct_pack(kind := p.kind, share := p.kind_us / s.step_us) ORDER BY p.kind_us DESC)
               AS kinds
    FROM (SELECT p.run_id, p.kind, sum(p.dur_us) AS kind_us
          FROM critical_path p JOIN slowest s ON s.run_id = p.run_id AND p.step IS NOT DISTINCT FROM s.step
          WHERE p.study = $1 AND p.kind IS NOT NULL AND p.kind <> 'wait' GROUP BY ALL) p
    JOIN slowest s USING (run_id) GROUP BY p.run_id
),
no_path AS (
    SELECT run_id, any_value(reason) AS reason FROM critical_path
    WHERE study = $1 AND reason IS NOT NULL GROUP BY run_id
),
op_time AS (
    SELECT run_id, op, flops, work_us / sum(work_us) OVER (PARTITION BY run_id) AS share,
           row_number() OVER (PARTITION BY run_id ORDER BY flops > 0 DESC, work_us DESC, op) AS time_rank
    FROM (SELECT run_id, op, sum(work_us) AS work_us, coalesce(sum(flops), 0) AS flops
          FROM op_breakdown WHERE study = $1 GROUP BY ALL)
)
SELECT r.run_id, r.strategy, r.world_size, s.step, s.step_us / 1e3 AS step_ms, p.path_rank, p.ranks,
       p.handovers, k.kinds, n.reason, o.op AS top_op, o.share AS top_op_share,
       sp.compute_efficiency
FROM runs_of r
LEFT JOIN slowest s USING (run_id)
LEFT JOIN path p USING (run_id)
LEFT JOIN kinds k USING (run_id)
LEFT JOIN no_path n USING (run_id)
LEFT JOIN op_time o ON o.run_id = r.run_id AND o.time_rank = 1
LEFT JOIN scale_points sp ON sp.study = r.study AND sp.run_id = r.run_id
ORDER BY r.world_size, r.strategy, r.run_id
"""
KIND_WORDS = {
    "compute": "compute",
    "copy": "copies",
    "transfer": "transfers",
    "host": "runtime calls",
    "host_gap": "host gaps",
    "launch_delay": "launch delays",
    "stream_wait": "stream waits",
    "sync_tail": "sync tails",
    "residual": "unexplained idle",
}


def point_rows(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """One row per run of the study: what its slowest step's path is made of and its top op."""
    if not (has_relation(con, "critical_path") and has_relation(con, "op_breakdown")):
        return pl.DataFrame()
    return frame(con, POINTS_QUERY, study)


def point_sentences(rows: pl.DataFrame, strategy: str | None = None) -> list[str]:
    """One sentence per run (scale point) naming what holds its step; with `strategy`, its runs only."""
    if strategy is not None and not rows.is_empty():
        rows = rows.filter(pl.col("strategy") == strategy)
    return [_sentence(row) for row in rows.iter_rows(named=True)]


def _sentence(row: dict) -> str:
    devices = f"{row['world_size']} device" + ("" if row["world_size"] == 1 else "s")
    head = f"{row['run_id']} ({row['strategy']}, {devices})"
    if row["kinds"] is None:
        why = row["reason"] or "no critical path is stored"
        held = f"no critical path ({why.rstrip('.')})"
    else:
        parts = [k for k in row["kinds"] if k["share"] >= 0.1][:3] or row["kinds"][:1]
        shares = _and([f"{KIND_WORDS.get(k['kind'], k['kind'])} {k['share']:.0%}" for k in parts])
        ranks = row["ranks"]
        where = f"on rank {ranks[0]}" if len(ranks) == 1 else f"across ranks {_and([str(r) for r in ranks])}"
        moves = row["handovers"]
        crossing = f", changing rank {moves} time{'s' if moves != 1 else ''} at a collective" if moves else ""
        held = (
            f"its slowest step ({row['step']}, {row['step_ms']:,.1f} ms replayed) is held by {shares} "
            f"of its critical path, {where}{crossing}"
        )
    top = ""
    if row["top_op"] is not None:
        top = f"; its top op with FLOPs is {row['top_op']} ({row['top_op_share']:.0%} of op time)"
    efficiency = ""
    if row["compute_efficiency"] is not None:
        efficiency = f", and compute ran at {row['compute_efficiency']:.0%} of its roofline bound"
    return f"{head}: {held}{top}{efficiency}."


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
