"""Scaling charts: throughput against the ideal line, per device, MFU, efficiency, marginal gain."""

from __future__ import annotations

import altair as alt
import duckdb
import polars as pl
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame

# ideal_tokens_per_s is the smallest scale point's throughput grown linearly; by the definition of
# scaling efficiency it equals tokens_per_s / scaling_efficiency, so nothing is recomputed here.
QUERY = """
SELECT coalesce(r.strategy, 'unspecified') AS strategy, s.run_id, s.world_size, s.tokens_per_s,
       s.tokens_per_s_per_device, s.mfu,
       s.scaling_efficiency, s.tokens_per_s / nullif(s.scaling_efficiency, 0) AS ideal_tokens_per_s,
       s.strategy_scaling_efficiency, s.strategy_base_world_size,
       s.marginal_tokens_per_s_per_device
FROM scale_points s JOIN runs r USING (study, run_id)
WHERE s.study = $1 AND s.tokens_per_s IS NOT NULL
ORDER BY r.strategy, s.world_size, s.run_id
"""
GRAIN = "One point per run (a repeat is a point of its own); lines join a strategy's runs by devices."
NO_THROUGHPUT = (
    "Throughput is unknown: no run manifest of this study gives tokens per step "
    "(global batch × sequence length)."
)


def scaling_rows(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """One row per run with a known throughput, with the scale-point figures the scaling charts plot."""
    return frame(con, QUERY, study)


def _tooltip() -> list[alt.Tooltip]:
    return [
        alt.Tooltip("run_id:N", title="run"),
        alt.Tooltip("world_size:Q", title="devices"),
        alt.Tooltip("tokens_per_s:Q", format=",.0f", title="tokens/s"),
        alt.Tooltip("tokens_per_s_per_device:Q", format=",.0f", title="tokens/s per device"),
        alt.Tooltip("scaling_efficiency:Q", format=".1%", title="scaling efficiency (study baseline)"),
        alt.Tooltip("strategy_scaling_efficiency:Q", format=".1%", title="vs its strategy's smallest run"),
        alt.Tooltip("mfu:Q", format=".1%", title="MFU"),
    ]


def throughput_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """Global tokens/s against devices on log axes with the ideal line dashed."""
    rows = scaling_rows(con, study)
    if rows.is_empty():
        return kit.nothing_to_draw(NO_THROUGHPUT)
    base = kit.only_chosen_strategy(alt.Chart(rows)).encode(x=kit.devices_x(), color=kit.strategy_colour())
    log_y = alt.Scale(type="log")
    measured = base.mark_line(point=True).encode(
        y=alt.Y("tokens_per_s:Q", title="tokens/s (log)", scale=log_y, axis=kit.plain_si_axis()),
        tooltip=_tooltip(),
    )
    ideal = base.mark_line(strokeDash=[4, 4], opacity=0.6).encode(
        y=alt.Y("ideal_tokens_per_s:Q", scale=log_y),
        tooltip=[alt.Tooltip("ideal_tokens_per_s:Q", format=",.0f")],
    )
    chart = alt.layer(ideal, measured).properties(
        width=kit.WIDTH,
        height=kit.HEIGHT,
        title="Global throughput (dashed: ideal linear scaling)",
    )
    return kit.with_strategy_signal(chart)


def per_device_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """Tokens/s per device, and MFU where the peak FLOP/s is known."""
    rows = scaling_rows(con, study)
    if rows.is_empty():
        return kit.nothing_to_draw(NO_THROUGHPUT)
    base = kit.only_chosen_strategy(alt.Chart(rows)).encode(
        x=kit.devices_x(), color=kit.strategy_colour(), tooltip=_tooltip()
    )
    per_device = (
        base.mark_line(point=True)
        .encode(y=alt.Y("tokens_per_s_per_device:Q", title="tokens/s per device", scale=alt.Scale(zero=True)))
        .properties(width=kit.WIDTH, height=kit.HEIGHT, title="Throughput per device")
    )
    panels = [per_device]
    if rows["mfu"].is_not_null().any():
        panels.append(
            base.mark_line(point=True)
            .encode(y=alt.Y("mfu:Q", title="MFU", axis=alt.Axis(format="%"), scale=alt.Scale(zero=True)))
            .properties(width=kit.WIDTH, height=kit.HEIGHT, title="Model FLOPs utilisation")
        )
    return kit.with_strategy_signal(alt.hconcat(*panels))


def efficiency_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """Scaling efficiency (80 % and 50 % lines) and marginal tokens/s per added device."""
    rows = scaling_rows(con, study)
    if rows.is_empty():
        return kit.nothing_to_draw(NO_THROUGHPUT)
    base = kit.only_chosen_strategy(alt.Chart(rows)).encode(
        x=kit.devices_x(), color=kit.strategy_colour(), tooltip=_tooltip()
    )
    curve = base.mark_line(point=True).encode(
        y=alt.Y(
            "scaling_efficiency:Q",
            title="scaling efficiency",
            axis=alt.Axis(format="%"),
            scale=alt.Scale(domain=[0, 1.05], clamp=True),
        )
    )
    limits = (
        alt.Chart(pl.DataFrame({"limit": [0.8, 0.5]}))
        .mark_rule(color="#888", strokeDash=[2, 3])
        .encode(y="limit:Q")
    )
    efficiency = alt.layer(curve, limits).properties(
        width=kit.WIDTH, height=kit.HEIGHT, title="Scaling efficiency (lines at 80 % and 50 %)"
    )
    if rows["marginal_tokens_per_s_per_device"].is_null().all():
        return kit.with_strategy_signal(efficiency)
    marginal = (
        kit.only_chosen_strategy(alt.Chart(rows))
        .mark_bar()
        .encode(
            x=alt.X(
                "world_size:O", title="devices (vs the previous scale point)", axis=alt.Axis(labelAngle=0)
            ),
            # one bar per run side by side, never stacked: a repeat is a bar of its own
            xOffset=alt.XOffset("run_id:N", sort=alt.EncodingSortField("strategy")),
            y=alt.Y(
                "marginal_tokens_per_s_per_device:Q", title="extra tokens/s per added device", stack=None
            ),
            color=kit.strategy_colour(),
            tooltip=[
                *_tooltip(),
                alt.Tooltip("marginal_tokens_per_s_per_device:Q", format=",.0f", title="marginal"),
            ],
        )
        .transform_filter("isValid(datum.marginal_tokens_per_s_per_device)")
        .properties(width=kit.WIDTH, height=kit.HEIGHT, title="Marginal throughput per added device")
    )
    return kit.with_strategy_signal(alt.hconcat(efficiency, marginal))
