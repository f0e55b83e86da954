"""Projected scaling: throughput per device projected to more devices, with the knee, and its breakdown."""

from __future__ import annotations

import shlex

import altair as alt
import duckdb
import polars as pl
from tracehouse.pipeline.projection.layouts import parse_layout, strategy_as
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame, has_relation

PROJECTED = """
SELECT coalesce(r.strategy, 'unspecified') AS strategy, p.layout, p.run_id, p.scenario, p.assumptions,
       p.notes, p.world_size, p.measured_world_size, p.step_time_us / 1e3 AS step_ms,
       p.step_time_high_us / p.step_time_us AS band_factor,
       json_extract_string(p.provenance, '$.band.basis') AS band_basis,
       p.tokens_per_s_per_device, p.scaling_efficiency, p.marginal_tokens_per_s_per_device,
       coalesce(p.knee, false) AS knee, p.knee_note, p.flag,
       p.compute_frac, p.exposed_comm_frac, p.other_frac, p.idle_frac,
       p.exposed_comm_dp_frac, p.exposed_comm_tp_frac, p.exposed_comm_pp_frac, p.exposed_comm_other_frac
FROM projections p JOIN runs r USING (study, run_id)
WHERE p.study = $1
ORDER BY strategy, p.run_id, p.scenario, p.world_size
"""
MEASURED = """
SELECT coalesce(r.strategy, 'unspecified') AS strategy, s.run_id, s.world_size, s.tokens_per_s_per_device
FROM scale_points s JOIN runs r USING (study, run_id)
WHERE s.study = $1 AND s.tokens_per_s_per_device > 0
ORDER BY strategy, s.world_size, s.run_id
"""
FRACTIONS = dict(
    zip(kit.PARTS, ("compute_frac", "exposed_comm_frac", "other_frac", "idle_frac"), strict=True)
)
DIMENSIONS = ("dp", "tp", "pp", "other")
# What a reader runs to fill the section: the world sizes are an example sweep.
EXAMPLE_WORLD_SIZES = "8,16,32,64,128,256,512,1024"


def available(con: duckdb.DuckDBPyConnection, study: str) -> bool:
    """Whether the study has projected points (the table exists once `tracehouse project` ran)."""
    return has_relation(con, "projections") and bool(
        frame(con, "SELECT count(*) AS n FROM projections WHERE study = $1", study)["n"][0]
    )


def hint(warehouse: str, study: str) -> str:
    """The one sentence that says how to project this study."""
    return (
        "No projection of this study is stored; make them with "
        f"tracehouse project --warehouse {shlex.quote(warehouse)} --study {shlex.quote(study)} "
        f"--world-sizes {EXAMPLE_WORLD_SIZES}"
    )


def projected_rows(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """One row per projected point (run, scenario, world size), with its curve name and the strategy
    of its layout: a DDP run projected as FSDP stands with the FSDP runs, split over tp ranks with
    the tp runs, as a pipeline with the pp runs."""
    rows = frame(con, PROJECTED, study)
    specs = {text: parse_layout(text) for text in rows["layout"].drop_nulls().unique()}
    strategies = [
        strategy_as(strategy, spec.kind, spec.tp, spec.pp) if (spec := specs.get(text)) else strategy
        for strategy, text in zip(rows["strategy"], rows["layout"], strict=True)
    ]
    strategies = [new or old for new, old in zip(strategies, rows["strategy"], strict=True)]
    rows = rows.with_columns(pl.Series("strategy", strategies, dtype=pl.String))
    several = rows["scenario"].n_unique() > 1
    name = pl.col("run_id") + " · " + pl.col("scenario") if several else pl.col("run_id")
    return rows.with_columns(name.alias("curve"))


def measured_rows(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """The study's measured scale points with a known throughput per device."""
    return frame(con, MEASURED, study)


def primary_runs(rows: pl.DataFrame) -> pl.DataFrame:
    """Per strategy, the run measured at the most devices (ties: the best measured throughput per device)."""
    at_measured = pl.col("world_size") == pl.col("measured_world_size")
    measured = rows.group_by("strategy", "run_id").agg(
        pl.col("measured_world_size").max(),
        pl.col("tokens_per_s_per_device").filter(at_measured).max().alias("measured_tpd"),
    )
    ranked = measured.sort(
        ["strategy", "measured_world_size", "measured_tpd", "run_id"],
        descending=[False, True, True, False],
        nulls_last=True,
    )
    return ranked.group_by("strategy", maintain_order=True).first()


def _sig(name: str) -> pl.Expr:
    # 4 significant digits: what a tooltip shows, a fraction of the spec's size
    return pl.col(name).round_sig_figs(4)


def breakdown_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per (primary run, scenario, world size): the projected step's four parts as shares, and the
    exposed communication's split by parallel dimension (shares of the step)."""
    chosen = rows.join(primary_runs(rows).select("strategy", "run_id"), on=["strategy", "run_id"])
    if chosen.is_empty():
        return pl.DataFrame()
    several = chosen["scenario"].n_unique() > 1
    panel = pl.format("{}: {} (measured on {})", "strategy", "run_id", "measured_world_size")
    return chosen.select(
        "strategy",
        (panel + " · " + pl.col("scenario") if several else panel).alias("panel"),
        "world_size",
        _sig("step_ms"),
        *(_sig(column).alias(part) for part, column in FRACTIONS.items()),
        *(_sig(f"exposed_comm_{d}_frac").alias(f"exposed {d}") for d in DIMENSIONS),
    ).sort("panel", "world_size")


def _curve_tooltip() -> list[alt.Tooltip]:
    return [
        alt.Tooltip("curve:N", title="run"),
        alt.Tooltip("world_size:Q", title="devices"),
        alt.Tooltip("tokens_per_s_per_device:Q", format=",.1f", title="tokens/s per device"),
        alt.Tooltip("scaling_efficiency:Q", format=".1%", title="of the measured per device"),
        alt.Tooltip("band_factor:Q", format=",.3~r", title="within a factor (band)"),
    ]


def band_rows(projected: pl.DataFrame, plotted: pl.Series) -> pl.DataFrame:
    """Each projected point's throughput band (the step time's band, inverted), cut at the lowest
    and highest plotted throughputs: a wider band (a study whose checks disagree with its
    projections) never squeezes the curves; its factor is in the tooltip."""
    lowest, highest = plotted.min(), plotted.max()
    factor, tokens = pl.col("band_factor").fill_null(1.0), pl.col("tokens_per_s_per_device")
    return projected.with_columns(
        (tokens / factor).clip(lowest, highest).round_sig_figs(4).alias("band_low"),
        (tokens * factor).clip(lowest, highest).round_sig_figs(4).alias("band_high"),
    )


def throughput_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """Projected tokens/s per device against devices (log2), one line per run and scenario, knees marked,
    the measured scale points as dots."""
    if not available(con, study):
        return kit.nothing_to_draw("No projection of this study is stored (tracehouse project makes them).")
    projected = projected_rows(con, study).filter(pl.col("tokens_per_s_per_device") > 0)
    if projected.is_empty():
        return kit.nothing_to_draw(
            "The projected runs have no throughput: no run manifest gives tokens per step."
        )
    measured = measured_rows(con, study).filter(
        pl.col("strategy").is_in(projected["strategy"].unique().implode())
    )
    plotted = pl.concat([projected["tokens_per_s_per_device"], measured["tokens_per_s_per_device"]])
    curves = band_rows(projected, plotted).select(
        "strategy",
        "curve",
        "world_size",
        _sig("tokens_per_s_per_device"),
        _sig("scaling_efficiency"),
        _sig("band_factor"),
        "band_low",
        "band_high",
        "knee",
        pl.col("flag").is_not_null().alias("flagged"),
        pl.lit("projected").alias("source"),
    )
    dots = measured.select(
        "strategy",
        pl.col("run_id").alias("curve"),
        "world_size",
        _sig("tokens_per_s_per_device"),
        pl.lit("measured").alias("source"),
    )
    rows = pl.concat([curves, dots], how="diagonal_relaxed")
    y = alt.Y(
        "tokens_per_s_per_device:Q",
        title="tokens/s per device (log)",
        scale=alt.Scale(type="log"),
        axis=kit.plain_si_axis(),
    )
    colour = alt.Color("curve:N", title="projected run", scale=alt.Scale(scheme="tableau10"))
    base = alt.Chart().encode(x=kit.devices_x(), y=y)
    band = (
        base.mark_area(opacity=0.12)
        .encode(
            y="band_low:Q",
            y2="band_high:Q",
            color=colour,
            detail="curve:N",
            tooltip=_curve_tooltip(),
        )
        .transform_filter("datum.source == 'projected'")
    )
    line = (
        base.mark_line(opacity=0.8)
        .encode(color=colour, detail="curve:N", tooltip=_curve_tooltip())
        .transform_filter("datum.source == 'projected'")
    )
    measured_dots = (
        base.mark_point(filled=True, size=60, color="#222", opacity=0.9)
        .encode(
            tooltip=[
                alt.Tooltip("curve:N", title="measured run"),
                alt.Tooltip("world_size:Q", title="devices"),
                alt.Tooltip("tokens_per_s_per_device:Q", format=",.1f", title="tokens/s per device"),
            ]
        )
        .transform_filter("datum.source == 'measured'")
    )
    # Rings, diamonds and knee labels are drawn on every projected point and shown only where they
    # apply: a layer filtered down to nothing (a strategy without a knee, picked on the page) would
    # give Vega an empty extent to warn about.
    projected_only = base.transform_filter("datum.source == 'projected'")
    # sizes that are no runnable configuration (less than one sequence per rank): hollow rings
    flagged_marks = projected_only.mark_point(shape="circle", size=70, filled=False, strokeWidth=1.5).encode(
        color=colour,
        tooltip=_curve_tooltip(),
        opacity=alt.condition("datum.flagged", alt.value(1), alt.value(0)),
    )
    knee_marks = projected_only.mark_point(shape="diamond", size=110, filled=True, stroke="#222").encode(
        color=colour,
        tooltip=_curve_tooltip(),
        opacity=alt.condition("datum.knee", alt.value(1), alt.value(0)),
    )
    # one label per knee size and panel, above its highest diamond: curves that share a knee
    # (repeats, runs of one strategy) would otherwise print "knee 8" over each other
    knee_labels = (
        projected_only.transform_calculate(
            at_knee="datum.knee ? 1 : 0", knee_tokens="datum.knee ? datum.tokens_per_s_per_device : null"
        )
        .transform_aggregate(
            runs="sum(at_knee)",
            knee_tokens="max(knee_tokens)",
            tokens_per_s_per_device="max(tokens_per_s_per_device)",
            groupby=["strategy", "world_size"],
        )
        .transform_calculate(
            tokens_per_s_per_device="datum.runs > 0 ? datum.knee_tokens : datum.tokens_per_s_per_device",
            label="datum.runs == 0 ? '' : 'knee ' + datum.world_size"
            " + (datum.runs > 1 ? ' (' + datum.runs + ' runs)' : '')",
        )
        .mark_text(align="left", dx=8, dy=-10, fontSize=11, color="#222")
        .encode(text="label:N")
    )
    # the line first: the legend draws its symbol (a band's pale swatch would not tell the curves apart)
    marks = (line, band, measured_dots, flagged_marks, knee_marks, knee_labels)
    layers = alt.layer(*marks, data=rows).properties(width=kit.WIDTH, height=kit.HEIGHT)
    faceted = kit.only_chosen_strategy(
        layers.facet(
            facet=alt.Facet("strategy:N", title=None, header=alt.Header(labelFontSize=13)), columns=3
        ).resolve_axis(x="independent")
    )
    return kit.with_strategy_signal(faceted).properties(
        title="Projected throughput per device (shade: the error band; dots: measured; diamonds: the knee; "
        "rings: fewer than one sequence per rank)"
    )


def breakdown_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """The projected step split into compute / exposed communication / other / idle, per world size,
    for each strategy's largest measured run."""
    if not available(con, study):
        return kit.nothing_to_draw("No projection of this study is stored (tracehouse project makes them).")
    rows = breakdown_rows(projected_rows(con, study))
    if rows.is_empty():
        return kit.nothing_to_draw("No projected run of this study has a breakdown.")
    # one row per point, folded into its parts here: a quarter of the rows in the page
    order = "indexof([" + ", ".join(f"'{p}'" for p in kit.PARTS) + "], datum.part)"
    bars = (
        alt.Chart(rows)
        .transform_fold(list(kit.PARTS), as_=["part", "share"])
        .transform_filter("datum.share > 0")  # a part with no time (copies on a CPU run) is no bar
        .transform_calculate(part_order=order)
        .mark_bar()
        .encode(
            x=alt.X("world_size:O", title="devices", axis=alt.Axis(labelAngle=-45)),
            y=alt.Y("sum(share):Q", title="share of step", stack="normalize", axis=alt.Axis(format="%")),
            color=kit.part_colour(),
            order=alt.Order("part_order:Q", sort="ascending"),
            tooltip=[
                alt.Tooltip("panel:N", title="run"),
                alt.Tooltip("world_size:Q", title="devices"),
                alt.Tooltip("part:N"),
                alt.Tooltip("share:Q", format=".1%", title="share of step"),
                alt.Tooltip("step_ms:Q", format=",.2f", title="step ms"),
                *(
                    alt.Tooltip(f"exposed {d}:Q", format=".1%", title=f"exposed comm, {d}")
                    for d in DIMENSIONS
                ),
            ],
        )
        .properties(width=kit.WIDTH, height=160)
    )
    # each panel's own world sizes only: a size projected for another run is no empty column here
    faceted = bars.facet(facet=alt.Facet("panel:N", title=None), columns=3).resolve_scale(x="independent")
    return kit.with_strategy_signal(kit.only_chosen_strategy(faceted)).properties(
        title="Projected step breakdown (each strategy's largest measured run)"
    )


def _percent(x: float) -> str:
    value = 100 * x
    if value >= 10:
        return f"{value:.0f} %"
    if value >= 0.1:
        return f"{value:.1f} %"
    return "less than 0.1 %" if value > 0 else "0 %"


def headline_sentence(con: duckdb.DuckDBPyConnection, study: str, strategy: str | None = None) -> str:
    """One sentence on the projection of the largest measured run (of the study or of one strategy):
    its knee, and the largest size."""
    rows = projected_rows(con, study)
    if strategy is not None:
        rows = rows.filter(pl.col("strategy") == strategy)
    if rows.is_empty():
        return "No projection of this study is stored."
    primary = primary_runs(rows).sort(
        ["measured_world_size", "measured_tpd", "run_id"], descending=[True, True, False], nulls_last=True
    )
    run_id = primary["run_id"][0]
    curve = rows.filter(pl.col("run_id") == run_id)
    scenario = "baseline" if "baseline" in curve["scenario"] else curve["scenario"].min()
    curve = curve.filter(pl.col("scenario") == scenario).sort("world_size")
    name = run_id if scenario == "baseline" else f"{run_id} ({scenario})"
    # the largest size that is a runnable configuration; flagged sizes are named, not described
    runnable = curve.filter(pl.col("flag").is_null())
    top = (runnable if not runnable.is_empty() else curve).row(-1, named=True)
    devices = f"{top['world_size']:,} device" + ("" if top["world_size"] == 1 else "s")
    knee = curve["knee_note"].drop_nulls().first() or "knee unknown"  # the projection says what it knows
    flagged = curve.filter(pl.col("flag").is_not_null())["world_size"]
    text = f"{name} projected: {knee}; at {devices}"
    if top["scaling_efficiency"] is not None:
        text += f" each device gives {_percent(top['scaling_efficiency'])} of its measured throughput,"
    else:
        text += f" a step takes {top['step_ms']:,.1f} ms,"
    text += f" {_percent(top['exposed_comm_frac'])} of the step is exposed communication"
    dims = {d: top[f"exposed_comm_{d}_frac"] or 0.0 for d in DIMENSIONS}
    leader = max(dims, key=dims.__getitem__)
    if top["exposed_comm_frac"] and dims[leader] > 0:
        text += f", {_percent(dims[leader] / top['exposed_comm_frac'])} of it {leader}"
    text += "."
    if top["band_factor"] is not None and top["world_size"] != top["measured_world_size"]:
        text += (
            f" Its error band there: the step time within a factor of {top['band_factor']:,.3g} "
            f"({top['band_basis'] or 'basis not recorded'})."
        )
    if flagged.len():
        sizes = ", ".join(f"{n:,}" for n in flagged)
        text += f" Flagged at {sizes} devices: {curve['flag'].drop_nulls().first()}."
    return text


RANKED = """
SELECT p.run_id, coalesce(r.strategy, 'unspecified') AS strategy, coalesce(r.tp, 1) AS tp,
       coalesce(r.pp, 1) AS pp, p.layout, p.world_size, p.tokens_per_s,
       p.step_time_high_us / p.step_time_us AS band_factor, p.flag
FROM projections p JOIN runs r USING (study, run_id)
WHERE p.study = $1 AND p.scenario = $2 AND p.world_size > p.measured_world_size
ORDER BY p.world_size, p.tokens_per_s DESC NULLS LAST, p.run_id
"""
# The ranked layouts a sentence names; the rest are counted.
RANKED_SHOWN = 3


def _tokens(x: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:,.3g}{unit}"
    return f"{x:,.3g}"


def ranking_sentence(con: duckdb.DuckDBPyConnection, study: str) -> str | None:
    """The study's layouts ranked at the largest projected world size where one is runnable (as
    `tracehouse project --search` ranks them), with their bands; None when none is."""
    scenarios = projected_rows(con, study)["scenario"].unique().sort()
    if scenarios.is_empty():
        return None
    scenario = "baseline" if "baseline" in scenarios else scenarios[0]
    rows = frame(con, RANKED, study, scenario)
    runnable = rows.filter(pl.col("flag").is_null() & (pl.col("tokens_per_s") > 0))
    if runnable.is_empty():
        return None
    size = runnable["world_size"].max()
    ranked = runnable.filter(pl.col("world_size") == size)
    named = []
    for i, r in enumerate(ranked.head(RANKED_SHOWN).iter_rows(named=True), 1):
        dp = size // (r["tp"] * r["pp"])  # rows stored before `layout`: the strategy and its degrees
        degrees = " ".join([r["strategy"], f"dp={dp}", *(f"{k}={r[k]}" for k in ("tp", "pp") if r[k] > 1)])
        layout = r["layout"] or degrees
        tokens, factor = r["tokens_per_s"], r["band_factor"]  # factor NULL: stored before the band
        band = "" if factor is None else f" (band {_tokens(tokens / factor)} to {_tokens(tokens * factor)})"
        named.append(f"{i}. {r['run_id']} ({layout}) {_tokens(tokens)} tokens/s{band}")
    more = ranked.height - len(named)
    text = f"At {size:,} devices ({scenario}), the study's layouts rank by projected tokens/s: " + "; ".join(
        named
    )
    text += f"; and {more} more." if more else "."
    unfit = rows.filter((pl.col("world_size") == size) & pl.col("flag").str.contains("does not fit"))
    if unfit.height:
        text += f" Not ranked, too large for the device's memory: {', '.join(sorted(unfit['run_id']))}."
    return text


def clauses_of(assumptions: str) -> list[str]:
    """A projection's assumptions split into its clauses: at each "; " outside parentheses."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(assumptions):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == ";" and depth == 0 and assumptions.startswith("; ", i):
            out.append(assumptions[start:i])
            start = i + 2
    return [*out, assumptions[start:]]


def assumptions_sentence(con: duckdb.DuckDBPyConnection, study: str) -> str:
    """The assumptions of the stored scenarios, in words: those every scenario shares once, then
    each scenario's own (a search stores dozens of scenarios that differ in a clause or two)."""
    rows = (
        projected_rows(con, study).select("scenario", "assumptions").unique().sort("scenario", "assumptions")
    )
    said = [
        (r["scenario"], clauses_of(r["assumptions"] or "not recorded")) for r in rows.iter_rows(named=True)
    ]
    shared = [c for c in said[0][1] if all(c in own for _, own in said)] if len(said) > 1 else []
    clauses = [
        f"{scenario}: {'; '.join(c for c in own if c not in shared) or 'nothing else'}"
        for scenario, own in said
    ]
    # what a projection left out or had to assume, each note once with the runs it holds for
    by_note = (
        projected_rows(con, study)
        .filter(pl.col("notes").is_not_null())
        .select("run_id", "notes")
        .unique()
        .group_by("notes")
        .agg(pl.col("run_id").sort())
        .sort(pl.col("run_id").list.first())
    )
    notes = [f"{', '.join(r['run_id'])}: {r['notes']}" for r in by_note.iter_rows(named=True)]
    return (
        ("Assumed by every scenario: " + "; ".join(shared) + ". " if shared else "")
        + "Assumptions, by scenario: "
        + ". ".join(clauses)
        + "."
        + (" Left out or assumed, by run: " + "; ".join(notes) + "." if notes else "")
    )
