"""Two runs compared (`tracehouse report --compare A B`): what changed per step, largest first."""

from __future__ import annotations

import altair as alt
import polars as pl
from tracehouse.pipeline.compare import RunDiff
from tracehouse.reports.charts import kit

TOP = 10
COMPONENT_TITLES = dict(zip(("compute", "exposed_comm", "other", "idle"), kit.PARTS, strict=True))


def comparison_rows(diff: RunDiff) -> pl.DataFrame:
    """One row per bar: the four components, then the kernels/ops that changed most each way."""
    named = sorted([*diff.regressions, *diff.improvements], key=lambda r: -abs(r["change_us"]))[:TOP]
    rows = [
        {"panel": "step-time components", "label": COMPONENT_TITLES.get(r["name"], r["name"]), **r}
        for r in diff.components
    ] + [{"panel": "kernels and ops", "label": r["name"], **r} for r in named]
    frame = pl.DataFrame(rows, infer_schema_length=None)
    return frame.with_columns(
        (pl.col("change_us") / 1e3).alias("change_ms"),
        (pl.col("a_us_per_step") / 1e3).alias("a_ms"),
        (pl.col("b_us_per_step") / 1e3).alias("b_ms"),
        pl.when(pl.col("change_us") > 0)
        .then(pl.lit("slower"))
        .otherwise(pl.lit("faster"))
        .alias("direction"),
    )


def comparison_chart(diff: RunDiff) -> alt.TopLevelMixin:
    """Diverging bars of the change per step (ms) of each component and of the top kernels/ops."""
    rows = comparison_rows(diff)
    if rows.is_empty():
        return kit.nothing_to_draw("The two runs have no step time to compare.")
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X("change_ms:Q", title=f"change per step, ms ({diff.b} - {diff.a})"),
            y=alt.Y(
                "label:N",
                sort=alt.EncodingSortField("change_ms", order="descending"),
                title=None,
                axis=alt.Axis(labelLimit=320),
            ),
            color=alt.Color(
                "direction:N",
                title=None,
                scale=alt.Scale(domain=["slower", "faster"], range=["#e45756", "#54a24b"]),
            ),
            tooltip=[
                alt.Tooltip("label:N", title="item"),
                alt.Tooltip("a_ms:Q", format=",.3f", title=f"{diff.a} ms/step"),
                alt.Tooltip("b_ms:Q", format=",.3f", title=f"{diff.b} ms/step"),
                alt.Tooltip("change_ms:Q", format="+,.3f", title="change ms"),
                alt.Tooltip("share_of_step_change:Q", format="+.1%", title="of the step change"),
            ],
        )
        .properties(width=kit.WIDTH * 1.5, height=alt.Step(16))
    )
    return bars.facet(
        row=alt.Row("panel:N", title=None, sort=["step-time components", "kernels and ops"])
    ).resolve_scale(y="independent")


def comparison_sentence(diff: RunDiff) -> str:
    """One sentence: the step-time change and the component that accounts for most of it."""
    if not diff.step_a_us:
        return f"{diff.a} has no step time to compare with."
    pct = 100 * diff.step_change_us / diff.step_a_us
    direction = "slower" if diff.step_change_us > 0 else "faster"
    text = (
        f"A step of {diff.b} takes {diff.step_b_us / 1e3:,.1f} ms against {diff.step_a_us / 1e3:,.1f} ms "
        f"for {diff.a}: {abs(pct):.1f} % {direction}."
    )
    if diff.step_change_us and diff.components:
        top = max(diff.components, key=lambda r: r["change_us"] * (1 if diff.step_change_us > 0 else -1))
        text += (
            f" {COMPONENT_TITLES.get(top['name'], top['name']).capitalize()} accounts for "
            f"{100 * top['share_of_step_change']:.0f} % of the change ({top['change_us'] / 1e3:+,.1f} ms)."
        )
    return text
