"""Parse a report page with the standard library: its elements, scripts and chart specs."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path


class Page(HTMLParser):
    """Every start tag with its attributes, and the text of every <script>."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)
            self.scripts.append((self._in_script, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def specs(self) -> dict[str, dict]:
        """The chart specs by container id."""
        return {
            a["data-chart"]: json.loads(t) for a, t in self.scripts if a.get("type") == "application/json"
        }

    def ids(self) -> list[str]:
        """Every element id, in document order."""
        return [a["id"] for _, a in self.tags if a.get("id")]


def read(path: Path) -> Page:
    """Parse a report file."""
    return Page(path.read_text(encoding="utf-8"))
