"""Compare two runs: what changed per step, by component, kernel or op name, innermost op and module.

Reads the `run_diff` view (see its contract); this module only resolves the runs the user
names and orders the rows for display (`tracehouse diff`, the Python API, the report).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl

COLUMNS = (
    "item",
    "kind",
    "name",
    "class",
    "a_us_per_step",
    "b_us_per_step",
    "change_us",
    "share_of_step_change",
    "on_path_b",
)

# The frame of `RunDiff.pl()`: which table a row is in, then the view's columns.
_FRAME_SCHEMA = {
    "section": str,
    "item": str,
    "kind": str,
    "name": str,
    "class": str,
    "a_us_per_step": float,
    "b_us_per_step": float,
    "change_us": float,
    "share_of_step_change": float,
    "on_path_b": bool,
}


@dataclass(frozen=True, kw_only=True)
class RunRef:
    """One run of the warehouse."""

    study: str
    run_id: str

    def __str__(self) -> str:
        return f"{self.study}/{self.run_id}"


@dataclass(kw_only=True)
class RunDiff:
    """Run B against run A: step times, and per item the time per step in each and the change."""

    a: RunRef
    b: RunRef
    step_a_us: float
    step_b_us: float
    components: list[dict[str, Any]] = field(default_factory=list)  # compute, exposed_comm, other, idle
    regressions: list[dict[str, Any]] = field(default_factory=list)  # kernels/ops, largest increase first
    improvements: list[dict[str, Any]] = field(default_factory=list)  # kernels/ops, largest decrease first
    # one level down: the innermost ops and the module paths (by phase) that changed most, either way
    ops: list[dict[str, Any]] = field(default_factory=list)
    modules: list[dict[str, Any]] = field(default_factory=list)

    @property
    def step_change_us(self) -> float:
        """B's step time less A's."""
        return self.step_b_us - self.step_a_us

    def __repr__(self) -> str:
        """Which runs, the step times and how many items changed, on one line."""
        return (
            f"RunDiff({self.a} -> {self.b}: step {self.step_a_us:,.0f} -> {self.step_b_us:,.0f} us "
            f"({self.step_change_us:+,.0f} us); {len(self.regressions)} regressions, "
            f"{len(self.improvements)} improvements; .pl() has every row)"
        )

    def _repr_html_(self) -> str:
        """The components, regressions and improvements as tables (a notebook shows this)."""
        from tracehouse.pipeline.display import html_table

        parts = [f"<p>{html.escape(repr(self))}</p>"]
        for title, rows in self._sections():
            if rows:
                parts.append(html_table(COLUMNS, [tuple(r[c] for c in COLUMNS) for r in rows], title))
        return "".join(parts)

    def pl(self) -> pl.DataFrame:
        """Every row (components, then regressions, then improvements) as a Polars frame."""
        import polars as pl

        rows = [{"section": title, **r} for title, rows in self._sections() for r in rows]
        return pl.DataFrame(rows, schema=_FRAME_SCHEMA)

    def df(self) -> pd.DataFrame:
        """Every row as a pandas frame (needs pandas)."""
        return self.pl().to_pandas()

    def _sections(self) -> list[tuple[str, list[dict[str, Any]]]]:
        return [
            ("components", self.components),
            ("regressions", self.regressions),
            ("improvements", self.improvements),
            ("ops", self.ops),
            ("modules", self.modules),
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "a": str(self.a),
            "b": str(self.b),
            "step_a_us": self.step_a_us,
            "step_b_us": self.step_b_us,
            "step_change_us": self.step_change_us,
            "components": self.components,
            "regressions": self.regressions,
            "improvements": self.improvements,
            "ops": self.ops,
            "modules": self.modules,
        }


def resolve_run(connection: duckdb.DuckDBPyConnection, text: str, study: str | None) -> RunRef:
    """The run a user names as RUN or STUDY/RUN (or RUN with --study); one line when unknown or ambiguous."""
    wanted_study, _, run_id = text.rpartition("/") if "/" in text else (study, "", text)
    rows = connection.execute(
        "SELECT DISTINCT study, run_id FROM step_breakdown WHERE run_id = ? AND (? IS NULL OR study = ?)"
        " ORDER BY study",
        [run_id, wanted_study, wanted_study],
    ).fetchall()
    if len(rows) == 1:
        return RunRef(study=rows[0][0], run_id=rows[0][1])
    if rows:
        options = ", ".join(f"{s}/{r}" for s, r in rows)
        raise WarehouseError(f"run {text!r} is in several studies: name one of {options}")
    known = [
        f"{s}/{r}"
        for s, r in connection.execute(
            "SELECT DISTINCT study, run_id FROM step_breakdown ORDER BY study, run_id"
        ).fetchall()
    ]
    hint = (
        f"; runs with a step time: {', '.join(known)}" if known else "; the warehouse has no run with steps"
    )
    raise WarehouseError(f"no run {text!r} with a step time in the warehouse{hint}")


def diff_runs(
    connection: duckdb.DuckDBPyConnection, run_a: str, run_b: str, *, study: str | None = None, top: int = 10
) -> RunDiff:
    """What changed from run A to run B, per step: components, the top `top` kernels/ops each way, and the
    `top` innermost ops and modules that changed most (with whether B's critical path runs through them)."""
    a, b = resolve_run(connection, run_a, study), resolve_run(connection, run_b, study)
    if a == b:
        raise WarehouseError(f"both runs are {a}: name two different runs")
    relation = connection.execute(
        f"SELECT {', '.join(COLUMNS)}, step_a_us, step_b_us FROM run_diff "
        "WHERE study_a = ? AND run_a = ? AND study_b = ? AND run_b = ? ORDER BY item, change_rank",
        [a.study, a.run_id, b.study, b.run_id],
    )
    rows = [dict(zip([*COLUMNS, "step_a_us", "step_b_us"], r, strict=True)) for r in relation.fetchall()]
    named = [r for r in rows if r["item"] in ("kernel", "op")]
    return RunDiff(
        a=a,
        b=b,
        step_a_us=rows[0]["step_a_us"] if rows else 0.0,
        step_b_us=rows[0]["step_b_us"] if rows else 0.0,
        components=[_item(r) for r in rows if r["item"] == "component"],
        regressions=[_item(r) for r in sorted(named, key=_larger_first) if r["change_us"] > 0][:top],
        improvements=[_item(r) for r in sorted(named, key=_smaller_first) if r["change_us"] < 0][:top],
        ops=_largest_changes(rows, "innermost_op", top),
        modules=_largest_changes(rows, "module", top),
    )


def _largest_changes(rows: list[dict[str, Any]], item: str, top: int) -> list[dict[str, Any]]:
    """The `top` rows of one item type that changed most, either way (largest |change| first)."""
    changed = [r for r in rows if r["item"] == item and r["change_us"] != 0]
    return [_item(r) for r in sorted(changed, key=lambda r: (-abs(r["change_us"]), r["name"], r["kind"]))][
        :top
    ]


def _larger_first(row: dict[str, Any]) -> tuple:
    return (-row["change_us"], row["name"], row["kind"])


def _smaller_first(row: dict[str, Any]) -> tuple:
    return (row["change_us"], row["name"], row["kind"])


def _item(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in COLUMNS}
