"""How tracehouse's results show in a notebook: small HTML tables, and charts that render offline.

A chart from `wh.charts` displays as an SVG drawn by vl-convert (no Vega from a CDN, which most
GPU nodes cannot reach), unless the user has chosen an Altair renderer of their own
(`alt.renderers.enable(...)`): then Altair's renderer draws it as usual. Global Altair state is
never changed. Nothing here imports altair or polars at module level (seconds to import).
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any

# An inline <svg> in HTML needs no namespace declarations (the HTML parser sets them); dropping
# them leaves the output free of URLs.
_SVG_NAMESPACES = re.compile(r'\s+xmlns(?::xlink)?="[^"]*"')
_OFFLINE_CLASSES: dict[type, type] = {}
_WHOLE_CLASSES: dict[type, type] = {}


def html_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "") -> str:
    """An HTML table of the rows (numbers right-aligned and rounded for reading), with a caption."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    title = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return f"<td>{'' if value is None else value}</td>"
    if isinstance(value, int):
        return f"<td style='text-align:right'>{value:,}</td>"
    if isinstance(value, float):
        return f"<td style='text-align:right'>{value:,.1f}</td>"
    return f"<td style='text-align:left'>{html.escape(str(value))}</td>"


def offline(chart: Any) -> Any:
    """The Altair chart (or None), made to display as an inline SVG in a notebook; see the module doc."""
    if chart is None:
        return None
    base = type(chart)
    if base not in _OFFLINE_CLASSES:
        _OFFLINE_CLASSES[base] = type(base.__name__, (base,), {"_repr_mimebundle_": _offline_bundle})
    object.__setattr__(chart, "__class__", _OFFLINE_CLASSES[base])  # Altair's setattr stores properties
    return chart


def whole(frame: Any) -> Any:
    """The Polars frame, made to show every row (not Polars' first and last five) in a notebook and a
    terminal: for short listings such as `wh.views()`. Frames derived from it display as usual."""
    import polars as pl

    base = type(frame)
    if base not in _WHOLE_CLASSES:

        def every_row(method: str) -> Any:
            def shown(self: Any, *args: Any, **kwargs: Any) -> str:
                with pl.Config(tbl_rows=-1):
                    return getattr(super(type(self), self), method)(*args, **kwargs)

            return shown

        methods = {m: every_row(m) for m in ("_repr_html_", "__repr__", "__str__")}
        _WHOLE_CLASSES[base] = type(base.__name__, (base,), methods)
    return _WHOLE_CLASSES[base]._from_pydf(frame._df)


def _offline_bundle(self: Any, *args: Any, **kwargs: Any) -> Any:
    """The chart's notebook display: Altair's own when the user chose a renderer, else an inline SVG."""
    import altair as alt

    if alt.renderers.active != "default":
        return super(type(self), self)._repr_mimebundle_(*args, **kwargs)
    return {"text/html": svg_html(self), "text/plain": f"<tracehouse chart: {chart_title(self)}>"}


def svg_html(chart: Any) -> str:
    """The chart drawn by vl-convert as an inline SVG element (no script, no URL)."""
    buffer = io.StringIO()
    chart.save(buffer, format="svg")
    return f"<div>{_SVG_NAMESPACES.sub('', buffer.getvalue(), count=2)}</div>"


def chart_title(chart: Any) -> str:
    """The chart's title text, or its kind of chart."""
    title = chart.to_dict().get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return str(title) if title else type(chart).__name__
