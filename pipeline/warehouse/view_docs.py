"""The public views' contracts (`sql/views/**/<name>.contract.toml`) and what is made from them.

Made from them: `docs/views.md` (run `python -m tracehouse.pipeline.warehouse.view_docs` to regenerate it;
a test fails when it drifts), the DuckDB comments on every public view and its columns (so any
DuckDB client shows them), and `wh.views()`.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

VIEWS_DIR = Path(__file__).resolve().parents[2] / "sql" / "views"
DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "views.md"


@dataclass(frozen=True, kw_only=True)
class Column:
    """One documented column of a view."""

    name: str
    type: str  # DuckDB type name as DESCRIBE prints it
    unit: str
    doc: str


@dataclass(frozen=True, kw_only=True)
class Contract:
    """What a public view promises: grain, columns with units, checks every row satisfies."""

    relation: str
    grain: str
    description: str
    columns: tuple[Column, ...]
    checks: tuple[str, ...]
    examples: tuple[tuple[str, str], ...]  # (question, SQL)


def load_contracts(views_dir: Path = VIEWS_DIR) -> list[Contract]:
    """Every contract under views_dir, in file-name order."""
    return [_read(path) for path in sorted(views_dir.rglob("*.contract.toml"), key=lambda p: p.name)]


@functools.cache
def contracts_by_relation() -> dict[str, Contract]:
    """The packaged contracts by relation name (read once per process)."""
    return {c.relation: c for c in load_contracts()}


def meaning(contract: Contract) -> str:
    """The view's meaning in one sentence: the first of its description."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", contract.description, maxsplit=1)[0]


def column_meaning(column: Column) -> str:
    """A column's meaning with its unit, e.g. `compute time (us)`."""
    return f"{column.doc} ({column.unit})" if column.unit else column.doc


def comment_statements(contract: Contract, kind: str, name: str | None = None) -> list[str]:
    """`COMMENT ON` statements giving the relation (kind: VIEW or TABLE; name: qualified, else the
    contract's) and its columns their meanings."""
    name = name or contract.relation
    statements = [f"COMMENT ON {kind} {name} IS {_literal(meaning(contract))}"]
    statements += [
        f'COMMENT ON COLUMN {name}."{c.name}" IS {_literal(column_meaning(c))}' for c in contract.columns
    ]
    return statements


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"  # COMMENT ON takes no prepared parameters


def _read(path: Path) -> Contract:
    data = tomllib.loads(path.read_text())
    return Contract(
        relation=data["relation"],
        grain=data["grain"],
        description=data["description"],
        columns=tuple(Column(**c) for c in data["columns"]),
        checks=tuple(data.get("checks", [])),
        examples=tuple((e["question"], e["sql"].strip()) for e in data.get("examples", [])),
    )


def render(contracts: list[Contract]) -> str:
    """docs/views.md as text."""
    lines = [
        "# Public views",
        "",
        "Generated from `sql/views/**/*.contract.toml` by",
        "`python -m tracehouse.pipeline.warehouse.view_docs`; do not edit by hand. Every rule behind",
        "these numbers is in METHODOLOGY.md and `docs/methodology-decisions.md`. Durations are µs",
        "(DOUBLE), instants ns since the epoch. The first sentence of each description is the view's",
        "DuckDB comment (and its `meaning` in `wh.views()`); each column's meaning and unit are its",
        "column comment.",
        "",
    ]
    for c in contracts:
        lines += _render_one(c)
    return "\n".join(lines).rstrip() + "\n"


def _render_one(c: Contract) -> list[str]:
    lines = [
        f"## `{c.relation}`",
        "",
        c.description,
        "",
        f"Grain: {c.grain}.",
        "",
        "| column | type | unit | meaning |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| `{col.name}` | {col.type} | {col.unit} | {col.doc} |" for col in c.columns]
    if c.checks:
        lines += ["", "Checks (hold on every row):", ""] + [f"* `{check}`" for check in c.checks]
    for question, sql in c.examples:
        lines += ["", f"Example: {question}", "", "```sql", sql, "```"]
    return [*lines, ""]


def main() -> int:
    """Write docs/views.md from the contracts."""
    DOC_PATH.write_text(render(load_contracts()))
    print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
