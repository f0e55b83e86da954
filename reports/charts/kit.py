"""What every chart shares: the page-wide strategy selector, the breakdown colours, the devices axis."""

from __future__ import annotations

import altair as alt

# The page's strategy <select> sets this Vega signal in every chart that declares it.
STRATEGY_SIGNAL = "strategy_pick"
ALL_STRATEGIES = "all"

# The four parts of a step, in stacking order, with their colours (compute first, idle last).
PARTS = ("compute", "exposed communication", "other", "idle")
PART_COLOURS = ("#4c78a8", "#e45756", "#b279a2", "#bab0ac")

WIDTH = 240
HEIGHT = 200


def run_label_sql(run_id: str = "s.run_id", world_size: str = "s.world_size") -> str:
    """SQL for a run's axis label, `run · N devices`: charts draw one mark per run, named so."""
    return (
        f"{run_id} || ' · ' || {world_size} || CASE WHEN {world_size} = 1 THEN ' device' ELSE ' devices' END"
    )


def run_x(title: str = "run · devices") -> alt.X:
    """One column per run (run_label), in the order of run_order (by devices, then run)."""
    return alt.X(
        "run_label:N",
        title=title,
        sort=alt.EncodingSortField("run_order", op="min"),
        axis=alt.Axis(labelAngle=-35, labelLimit=160),
    )


def only_chosen_strategy(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """Keep only rows of the strategy chosen in the page's selector (all by default).

    On a faceted chart, filter the facet itself (not its inner chart): the panels of the other
    strategies' runs then go away instead of staying as empty panels with no extent."""
    return chart.transform_filter(
        f"{STRATEGY_SIGNAL} == '{ALL_STRATEGIES}' || datum.strategy == {STRATEGY_SIGNAL}"
    )


def with_strategy_signal(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """Declare the strategy signal at the top of a chart so the page's selector can set it."""
    return chart.add_params(alt.param(name=STRATEGY_SIGNAL, value=ALL_STRATEGIES))


def devices_x(title: str = "devices (log2)") -> alt.X:
    """World size on a log2 axis with a tick at every power of two."""
    return alt.X(
        "world_size:Q",
        title=title,
        scale=alt.Scale(type="log", base=2, nice=False),
        axis=alt.Axis(values=[2**k for k in range(0, 17)], format="d"),
    )


def strategy_colour() -> alt.Color:
    """One colour per strategy, consistent across charts."""
    return alt.Color("strategy:N", title="strategy", scale=alt.Scale(scheme="tableau10"))


def part_colour() -> alt.Color:
    """The breakdown colours in stacking order."""
    return alt.Color(
        "part:N", title="time spent on", scale=alt.Scale(domain=list(PARTS), range=list(PART_COLOURS))
    )


def bytes_x(field: str = "bytes") -> alt.X:
    """Message size on a log2 axis labelled in KiB / MiB / GiB at every power of four."""
    label = (
        "datum.value >= 1073741824 ? datum.value / 1073741824 + ' GiB' : "
        "datum.value >= 1048576 ? datum.value / 1048576 + ' MiB' : "
        "datum.value >= 1024 ? datum.value / 1024 + ' KiB' : datum.value + ' B'"
    )
    return alt.X(
        f"{field}:Q",
        title="message size (log2)",
        # padding: a point at the smallest or largest size is drawn inside the frame, not on it
        scale=alt.Scale(type="log", base=2, nice=False, padding=12),
        axis=alt.Axis(values=[4**k for k in range(0, 18)], labelExpr=label, labelOverlap=True),
    )


# Axis labels in plain k / M / G (Vega's "~s" writes 0.1 as "100m", an SI milli that reads as millions).
PLAIN_SI = (
    "datum.value >= 1e9 ? format(datum.value / 1e9, '~g') + 'G' : "
    "datum.value >= 1e6 ? format(datum.value / 1e6, '~g') + 'M' : "
    "datum.value >= 1e3 ? format(datum.value / 1e3, '~g') + 'k' : format(datum.value, '~g')"
)


def plain_si_axis(**kwargs: object) -> alt.Axis:
    """An axis labelled 0.01, 0.1, 1, 10, 1k, 10k, 1M: never an SI milli or micro prefix."""
    return alt.Axis(labelExpr=PLAIN_SI, **kwargs)


# Where a chart function has nothing to draw it returns a chart that says why (never None):
# `wh.charts.<name>()` then shows the reason, and the report prints it as a sentence instead.
EMPTY_KEY = "tracehouse_empty"


def nothing_to_draw(reason: str) -> alt.Chart:
    """A one-line chart that says why there is no chart; `empty_reason` reads the reason back."""
    data = alt.Data(values=[{"reason": reason}])
    return (
        alt.Chart(data)
        .mark_text(align="left", baseline="top", fontSize=13, color="#5b6575")
        .encode(text="reason:N")
        .properties(width=_text_width(reason), height=20, usermeta={EMPTY_KEY: reason})
    )


def _text_width(text: str) -> int:
    """A width that fits one line of text at 13 px."""
    return max(200, 7 * len(text))


def empty_reason(chart: alt.TopLevelMixin | None) -> str | None:
    """The reason a `nothing_to_draw` chart gives, or None for a real chart."""
    meta = getattr(chart, "usermeta", None)
    return meta.get(EMPTY_KEY) if isinstance(meta, dict) else None
