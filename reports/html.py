"""Assemble the report page: one self-contained HTML file with the Vega libraries inlined once."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import jinja2
from tracehouse.reports.charts.kit import ALL_STRATEGIES, empty_reason
from tracehouse.reports.headline import Fact
from tracehouse.reports.methodology import Methodology
from tracehouse.reports.tables import Table

TEMPLATES = Path(__file__).parent / "templates"

# Inside <script>, only `</script` (and `<!--`) can end or derail the block: JSON escapes for
# `<`, `>` and `&` make every string from a trace inert there while staying the same JSON.
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


@dataclass(kw_only=True)
class Figure:
    """One chart of a section, or the sentence that stands in for it."""

    id: str
    title: str
    chart: alt.TopLevelMixin | None = None
    note: str | None = None  # shown when there is no chart
    caption: str | None = None
    grain: str | None = None  # what one mark is: "one bar per run", shown under the chart
    details: list[str] = field(default_factory=list)  # folded away under the note or chart
    details_title: str = "Details"

    def __post_init__(self) -> None:
        # a chart that only says why it is empty reads better as the page's own sentence
        reason = empty_reason(self.chart)
        if reason is not None:
            self.chart, self.note = None, reason

    @functools.cached_property
    def spec_json(self) -> str | None:
        """The chart's Vega-Lite spec as JSON that is safe inside a <script> block."""
        return None if self.chart is None else script_safe_json(self.chart.to_dict())


@dataclass(kw_only=True)
class Section:
    """A titled group of figures."""

    id: str
    title: str
    intro: str | None = None
    figures: list[Figure] = field(default_factory=list)
    # the intro's data sentence for one strategy's runs, shown when the page's picker chooses it
    intro_by_strategy: dict[str, str] = field(default_factory=dict)
    # findings listed under the intro (one per scale point, ...), and those of each strategy's runs
    points: list[str] = field(default_factory=list)
    points_by_strategy: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # charts of one missing input say the same sentence: say it once
        said: set[str] = set()
        kept = []
        for figure in self.figures:
            if figure.chart is None and figure.note in said:
                continue
            said.add(figure.note or "")
            kept.append(figure)
        self.figures = kept


@dataclass(kw_only=True)
class Page:
    """Everything the page shows, already read from the warehouse."""

    study: str
    warehouse: str
    generated_at: str
    version: str
    strategies: list[str]
    headline: list[Fact]
    # the headline of one strategy's runs, shown when the page's picker chooses it
    headline_by_strategy: dict[str, list[Fact]] = field(default_factory=dict)
    sections: list[Section]
    methodology: Methodology
    provenance: list[Table]


def script_safe_json(value: object) -> str:
    """JSON text with `<`, `>`, `&` and the JS line separators escaped, so it cannot leave a <script>."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    for raw, escaped in _JSON_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


@functools.cache
def vega_bundle() -> str:
    """Vega, Vega-Lite (the version Altair targets) and vega-embed as one script, with no imports."""
    import vl_convert
    from altair.utils._importers import vl_version_for_vl_convert

    bundle = vl_convert.javascript_bundle(vl_version=vl_version_for_vl_convert())
    # Never true for the vendored bundle today; a future one must not end the <script> early.
    return bundle.replace("</script", "<\\/script").replace("<!--", "<\\!--")


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def render(page: Page) -> str:
    """The page as HTML text."""
    template = _environment().get_template("report.html.j2")
    return template.render(
        page=page,
        css=(TEMPLATES / "report.css").read_text(),
        boot_js=(TEMPLATES / "boot.js").read_text(),
        vega_bundle=vega_bundle(),
        all_strategies=ALL_STRATEGIES,
    )
