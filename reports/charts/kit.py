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


def only_chosen_strategy(chart: alt.Chart) -> alt.Chart:
    """Keep only rows of the strategy chosen in the page's selector (all by default)."""
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
        scale=alt.Scale(type="log", base=2, nice=False),
        axis=alt.Axis(values=[4**k for k in range(0, 18)], labelExpr=label, labelOverlap=True),
    )
