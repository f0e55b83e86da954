"""Build a study's report from a warehouse: read the views, lay out the sections, write HTML (and PNGs)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.pipeline.common.version import version
from tracehouse.pipeline.compare import diff_runs
from tracehouse.reports.headline import headline
from tracehouse.reports.html import Page, render
from tracehouse.reports.methodology import methodology
from tracehouse.reports.provenance import display_path, provenance_tables
from tracehouse.reports.sections import (
    breakdown_section,
    comparison_section,
    detail_sections,
    inside_section,
    power_section,
    projection_section,
    scaling_section,
    waits_section,
)
from tracehouse.reports.source import frame, open_warehouse, pick_study


@dataclass(kw_only=True)
class ReportResult:
    """What a report build wrote."""

    html: Path
    study: str
    charts: int
    pngs: list[Path]


def build_page(
    con: duckdb.DuckDBPyConnection,
    study: str,
    warehouse_label: str,
    *,
    compare: tuple[str, str] | None = None,
) -> Page:
    """Read everything the page shows (with `compare`, a section comparing those two runs)."""
    strategies = frame(
        con, "SELECT DISTINCT strategy FROM runs WHERE study = $1 AND strategy IS NOT NULL ORDER BY 1", study
    )["strategy"].to_list()
    # the picker offers the strategies when there are several; each then gets its own headline
    picked = strategies if len(strategies) > 1 else []
    return Page(
        study=study,
        warehouse=warehouse_label,
        generated_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        version=version(),
        strategies=strategies,
        headline=headline(con, study),
        headline_by_strategy={name: headline(con, study, name) for name in picked},
        sections=[
            breakdown_section(con, study),
            waits_section(con, study),
            inside_section(con, study),
            *([comparison_section(diff_runs(con, *compare, study=None))] if compare else []),
            scaling_section(con, study),
            projection_section(con, study, warehouse_label),
            power_section(con, study),
            *detail_sections(con, study),
        ],
        methodology=methodology(con, study),
        provenance=provenance_tables(con, study),
    )


def write_pngs(page: Page, directory: Path) -> list[Path]:
    """Write every chart of the page as a PNG (through vl-convert) and return the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for section in page.sections:
        for figure in section.figures:
            if figure.chart is not None:
                target = directory / f"{figure.id.removeprefix('fig-')}.png"
                figure.chart.save(str(target), format="png", scale_factor=2)
                written.append(target)
    return written


def build_report(
    warehouse_dir: str | Path,
    out: str | Path,
    *,
    study: str | None = None,
    png_dir: str | Path | None = None,
    compare: tuple[str, str] | None = None,
) -> ReportResult:
    """Write the HTML report of one study of a warehouse (and its charts as PNGs when png_dir is given).

    `compare` (RUN_A, RUN_B; each RUN or STUDY/RUN) adds a section on what changed between them.
    """
    out = Path(out)
    con = open_warehouse(warehouse_dir)
    try:
        chosen = pick_study(con, study)
        page = build_page(con, chosen, display_path(str(warehouse_dir), parts=1), compare=compare)
    finally:
        con.close()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(render(page), encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        raise WarehouseError(f"{out}: cannot write the report: {exc.strerror}") from exc
    pngs = write_pngs(page, Path(png_dir)) if png_dir is not None else []
    charts = sum(1 for s in page.sections for f in s.figures if f.chart is not None)
    return ReportResult(html=out, study=chosen, charts=charts, pngs=pngs)
