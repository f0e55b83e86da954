"""Power and energy per scale point, or the reason there is none."""

from __future__ import annotations

import altair as alt
import duckdb
from tracehouse.reports.charts import kit
from tracehouse.reports.source import frame

QUERY = """
SELECT coalesce(r.strategy, 'unspecified') AS strategy, s.run_id, s.world_size,
       s.avg_power_w_per_device, s.energy_per_step_j, s.tokens_per_j
FROM scale_points s JOIN runs r USING (study, run_id)
WHERE s.study = $1 AND s.avg_power_w_per_device IS NOT NULL
ORDER BY r.strategy, s.world_size
"""
COVERAGE_QUERY = """
SELECT coalesce(bool_or(has_power), false) AS has_power FROM power_coverage WHERE study = $1
"""
REASON_QUERY = """
SELECT DISTINCT unavailable_reason AS reason FROM power_coverage
WHERE study = $1 AND unavailable_reason IS NOT NULL
ORDER BY 1
"""


def power_chart(con: duckdb.DuckDBPyConnection, study: str) -> alt.TopLevelMixin:
    """Average power per device and tokens per joule against devices, or a chart saying why not."""
    rows = frame(con, QUERY, study)
    if rows.is_empty():
        return kit.nothing_to_draw(power_summary(con, study))
    base = kit.only_chosen_strategy(alt.Chart(rows)).encode(
        x=kit.devices_x(),
        color=kit.strategy_colour(),
        tooltip=[
            alt.Tooltip("run_id:N", title="run"),
            alt.Tooltip("avg_power_w_per_device:Q", format=",.1f", title="W per device"),
            alt.Tooltip("energy_per_step_j:Q", format=",.1f", title="J per step (all devices)"),
            alt.Tooltip("tokens_per_j:Q", format=",.2f", title="tokens per J"),
        ],
    )
    watts = (
        base.mark_line(point=True)
        .encode(y=alt.Y("avg_power_w_per_device:Q", title="average W per device", scale=alt.Scale(zero=True)))
        .properties(width=kit.WIDTH, height=kit.HEIGHT, title="Power per device")
    )
    per_joule = (
        base.mark_line(point=True)
        .encode(y=alt.Y("tokens_per_j:Q", title="tokens per joule", scale=alt.Scale(zero=True)))
        .properties(width=kit.WIDTH, height=kit.HEIGHT, title="Energy efficiency")
    )
    return kit.with_strategy_signal(alt.hconcat(watts, per_joule))


def power_unavailable_reasons(con: duckdb.DuckDBPyConnection, study: str) -> list[str]:
    """The distinct reasons the study's run manifests give for capturing no power."""
    return frame(con, REASON_QUERY, study)["reason"].to_list()


def power_details(con: duckdb.DuckDBPyConnection, study: str) -> list[str]:
    """What each power tool said, one line each (a manifest joins its tools' messages with ' | ')."""
    return [part.strip() for reason in power_unavailable_reasons(con, study) for part in reason.split(" | ")]


def _tool(detail: str) -> str | None:
    # the collectors write "<tool>: <message>"; a longer prefix is part of a free-text reason
    name, colon, _ = detail.partition(":")
    return name if colon and name and len(name) <= 20 and " " not in name else None


def power_summary(con: duckdb.DuckDBPyConnection, study: str) -> str:
    """One sentence on why there is no power chart (the tools' own messages are `power_details`)."""
    if frame(con, COVERAGE_QUERY, study)["has_power"][0]:
        return "Power was logged, but no run has power on every device over a whole step."
    details = power_details(con, study)
    if not details:
        return "No power was captured for this study, and its run manifests give no reason."
    tools = list(dict.fromkeys(t for t in map(_tool, details) if t is not None))
    if tools:
        return (
            f"No power was captured for this study: none of its power tools ({', '.join(tools)}) "
            "could be read on its hosts (details below)."
        )
    return "No power was captured for this study (the run manifests' reason is below)."


def power_note(con: duckdb.DuckDBPyConnection, study: str) -> str | None:
    """The sentence saying why there is no power chart, or None when there is one."""
    if frame(con, COVERAGE_QUERY, study)["has_power"][0]:
        return None
    return power_summary(con, study)
