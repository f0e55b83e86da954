"""Progress output: log lines when not a terminal, a redrawn bar on one, errors always one line."""

from __future__ import annotations

import io

from tracehouse.pipeline.progress import BarProgress, LineProgress, Silent, make_progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_lines():
    out = io.StringIO()
    p = LineProgress(out)
    p.start(2)
    p.file_done("/d/a.json", "loaded", "7 events")
    p.file_done("/d/b.json", "failed", "invalid JSON")
    p.finish()
    assert out.getvalue().splitlines() == [
        "tracehouse ingest: 2 file(s) to ingest",
        "tracehouse ingest: [1/2] loaded /d/a.json (7 events)",
        "tracehouse ingest: error: /d/b.json: invalid JSON",
    ]


def test_bar_redraws_and_prints_errors_on_their_own_line():
    out = Tty()
    p = BarProgress(out)
    p.start(2)
    p.file_done("/d/a.json", "loaded", "7 events")
    p.file_done("/d/b.json", "failed", "invalid JSON")
    p.finish()
    text = out.getvalue()
    assert "[" + "#" * 15 + "-" * 15 + "] 1/2 a.json" in text
    assert "\ntracehouse ingest: error: /d/b.json: invalid JSON\n" in text.replace("\r\x1b[2K", "\n")
    assert text.endswith("[" + "#" * 30 + "] 2/2 b.json\n")


def test_bar_moves_when_a_file_is_read_and_once_per_file():
    out = Tty()
    p = BarProgress(out)
    p.start(2)
    p.file_read("/d/a.json")  # read; its outcome waits for its run's rank claims
    assert out.getvalue().endswith("[" + "#" * 15 + "-" * 15 + "] 1/2 a.json")
    p.file_read("/d/b.json")
    p.file_done("/d/a.json", "loaded", "7 events")
    p.file_done("/d/b.json", "loaded", "7 events")
    p.finish()
    assert out.getvalue().endswith("[" + "#" * 30 + "] 2/2 b.json\n")
    assert "3/2" not in out.getvalue() and "4/2" not in out.getvalue()


def test_auto_picks_by_terminal():
    assert isinstance(make_progress("auto", Tty()), BarProgress)
    assert isinstance(make_progress("auto", io.StringIO()), LineProgress)
    assert isinstance(make_progress(None), Silent) and isinstance(make_progress("off"), Silent)
