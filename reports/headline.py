"""The report's headline: the study's answer in a few sentences, read from `scale_points`."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl
from tracehouse.reports.source import frame

QUERY = """
SELECT coalesce(r.strategy, 'unspecified') AS strategy, s.run_id, s.world_size, r.nodes, s.step_time_us,
       s.tokens_per_s_per_device, s.mfu,
       s.scaling_efficiency, s.compute_frac, s.exposed_comm_frac, s.other_frac, s.idle_frac
FROM scale_points s JOIN runs r USING (study, run_id)
WHERE s.study = $1
ORDER BY r.strategy, s.world_size
"""
PART_COLUMNS = {
    "compute": "compute_frac",
    "exposed communication": "exposed_comm_frac",
    "other": "other_frac",
    "idle": "idle_frac",
}
THRESHOLDS = (0.8, 0.5)


@dataclass(kw_only=True)
class Fact:
    """One headline line: a short label and the sentence that answers it."""

    label: str
    text: str


def headline(con: duckdb.DuckDBPyConnection, study: str) -> list[Fact]:
    """The headline facts of a study, in reading order."""
    rows = frame(con, QUERY, study)
    if rows.is_empty():
        return [Fact(label="No data", text="This study has no scale point with a measured step.")]
    return [
        Fact(label="Scale points", text=scale_points_sentence(rows)),
        Fact(label="Best throughput per device", text=best_sentence(rows)),
        Fact(label="Scaling efficiency", text=efficiency_sentence(rows)),
        Fact(label="At the largest scale", text=dominant_sentence(rows)),
    ]


def _strategies(rows: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    return [
        (str(key[0] or "unspecified"), part) for key, part in rows.group_by("strategy", maintain_order=True)
    ]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def scale_points_sentence(rows: pl.DataFrame) -> str:
    """Which device counts and strategies were measured."""
    worlds = ", ".join(str(w) for w in sorted(rows["world_size"].unique().to_list()))
    names = ", ".join(name for name, _ in _strategies(rows))
    nodes = rows["nodes"].drop_nulls()
    span = f" on {nodes.min()}–{nodes.max()} nodes" if len(nodes) and nodes.max() != nodes.min() else ""
    return f"{rows.height} runs: {worlds} devices{span}; strategies {names}."


def best_sentence(rows: pl.DataFrame) -> str:
    """The run with the highest tokens/s per device."""
    rows = rows.filter(pl.col("tokens_per_s_per_device").is_not_null())
    if rows.is_empty():
        return "unknown: no run manifest gives tokens per step (global batch × sequence length)."
    best = rows.sort("tokens_per_s_per_device", descending=True, nulls_last=True).row(0, named=True)
    mfu = f", MFU {best['mfu']:.1%}" if best["mfu"] is not None else ""
    return (
        f"{best['tokens_per_s_per_device']:,.0f} tokens/s per device with {best['strategy']} "
        f"on {best['world_size']} device(s) (run {best['run_id']}{mfu})."
    )


def first_below(part: pl.DataFrame, limit: float) -> dict | None:
    """The smallest scale point whose scaling efficiency is below limit, or None."""
    below = part.filter(pl.col("scaling_efficiency") < limit).sort("world_size")
    return below.row(0, named=True) if below.height else None


def efficiency_sentence(rows: pl.DataFrame) -> str:
    """Where each strategy's scaling efficiency drops below 80 % and 50 %."""
    rows = rows.filter(pl.col("scaling_efficiency").is_not_null())
    if rows["world_size"].n_unique() < 2:
        return "needs a known throughput at two or more scale points."
    clauses = []
    for name, part in _strategies(rows):
        marks = []
        for limit in THRESHOLDS:
            hit = first_below(part, limit)
            if hit is None:
                marks.append(f"never below {limit:.0%} (up to {part['world_size'].max()} devices)")
                break
            marks.append(
                f"below {limit:.0%} from {hit['world_size']} devices ({_pct(hit['scaling_efficiency'])})"
            )
        clauses.append(f"{name}: " + ", ".join(marks))
    # METHODOLOGY.md measures every strategy against the study's smallest scale point (its best
    # tokens/s there), so say so: a strategy is not measured against its own baseline.
    base = rows.sort("world_size")["world_size"][0]
    return "; ".join(clauses) + f" (against the study's best throughput on {base} device(s))."


def dominant_sentence(rows: pl.DataFrame) -> str:
    """What takes most of the step at each strategy's largest scale point, with the full split."""
    clauses = []
    for name, part in _strategies(rows):
        top = part.sort("world_size").row(-1, named=True)
        if top["compute_frac"] is None or top["step_time_us"] is None:
            clauses.append(f"{name} on {top['world_size']} devices: no measured step")
            continue
        shares = {label: top[column] or 0.0 for label, column in PART_COLUMNS.items()}
        leader = max(shares, key=shares.__getitem__)
        rest = ", ".join(f"{label} {_pct(v)}" for label, v in shares.items() if label != leader)
        clauses.append(
            f"{name} on {top['world_size']} devices: {leader} dominates, {_pct(shares[leader])} "
            f"of a {top['step_time_us'] / 1e3:,.1f} ms step ({rest})"
        )
    return "; ".join(clauses) + "."
