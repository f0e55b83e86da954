"""The report's headline: the study's answer in a few sentences, read from `scale_points`."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import polars as pl
from tracehouse.reports.source import frame
from tracehouse.reports.tables import present

QUERY = """
SELECT coalesce(r.strategy, 'unspecified') AS strategy, s.run_id, s.world_size, r.nodes, s.step_time_us,
       s.tokens_per_s_per_device, s.mfu,
       s.scaling_efficiency, s.strategy_scaling_efficiency, s.strategy_base_world_size,
       s.compute_frac, s.exposed_comm_frac, s.other_frac, s.idle_frac
FROM scale_points s JOIN runs r USING (study, run_id)
WHERE s.study = $1 AND ($2 IS NULL OR r.strategy = $2)
ORDER BY r.strategy, s.world_size, s.run_id
"""
PART_COLUMNS = {
    "compute": "compute_frac",
    "exposed communication": "exposed_comm_frac",
    "other": "other_frac",
    "idle": "idle_frac",
}
THRESHOLDS = (0.8, 0.5)
UNSPECIFIED = "unspecified"  # the strategy column of a run whose manifest names none


@dataclass(kw_only=True)
class Fact:
    """One headline line: a short label and the sentence that answers it."""

    label: str
    text: str


def headline(con: duckdb.DuckDBPyConnection, study: str, strategy: str | None = None) -> list[Fact]:
    """The headline facts of a study (of one strategy's runs when given), in reading order."""
    rows = frame(con, QUERY, study, strategy)
    if rows.is_empty():
        return [Fact(label="No data", text="This study has no scale point with a measured step.")]
    facts = [
        Fact(label="Scale points", text=scale_points_sentence(rows)),
        Fact(label="Best throughput per device", text=best_sentence(rows)),
        Fact(label="Scaling efficiency", text=efficiency_sentence(rows)),
        Fact(label="At the largest scale", text=dominant_sentence(rows)),
    ]
    partial = partial_runs(con, study, strategy)
    if partial.height:
        facts.append(Fact(label="Partial runs", text=partial_sentence(partial)))
    return facts


PARTIAL = """
SELECT c.run_id, any_value(c.run_world_size) AS world_size, count(*) AS rank_traces
FROM trace_coverage c JOIN runs r USING (study, run_id)
WHERE c.study = $1 AND c.run_coverage IS NOT NULL AND ($2 IS NULL OR r.strategy = $2)
GROUP BY c.run_id ORDER BY c.run_id
"""


def partial_runs(con: duckdb.DuckDBPyConnection, study: str, strategy: str | None = None) -> pl.DataFrame:
    """The runs with fewer rank traces than their world size (trace_coverage.run_coverage)."""
    if "run_coverage" not in present(con, "trace_coverage", ("run_coverage",)):
        return pl.DataFrame()  # a warehouse of an older tracehouse
    return frame(con, PARTIAL, study, strategy)


def partial_sentence(partial: pl.DataFrame) -> str:
    """Which runs have traces of only some ranks: their figures cover those ranks only."""
    runs = [
        f"{r['run_id']} ({r['rank_traces']:,} of {r['world_size']:,} ranks)"
        for r in partial.iter_rows(named=True)
    ]
    return (
        f"{', '.join(runs)}: the other ranks' traces are not in the warehouse, so these runs' step "
        "times and breakdowns cover the ranks shown only (Provenance lists them)."
    )


def _strategies(rows: pl.DataFrame) -> list[tuple[str, pl.DataFrame]]:
    return [
        (str(key[0] or "unspecified"), part) for key, part in rows.group_by("strategy", maintain_order=True)
    ]


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _devices(n: int) -> str:
    return f"{n:,} device" + ("" if n == 1 else "s")


def scale_points_sentence(rows: pl.DataFrame) -> str:
    """Which device counts and strategies were measured, and which were measured more than once."""
    worlds = ", ".join(str(w) for w in sorted(rows["world_size"].unique().to_list()))
    names = ", ".join(name for name, _ in _strategies(rows))
    nodes = rows["nodes"].drop_nulls()
    span = f" on {nodes.min()}–{nodes.max()} nodes" if len(nodes) and nodes.max() != nodes.min() else ""
    runs = f"{rows.height} run" + ("" if rows.height == 1 else "s")
    unit = "device" if worlds == "1" else "devices"
    text = f"{runs}: {worlds} {unit}{span}; strategies {names}."
    # runs without a strategy are unrelated traces, not repeats of one another
    shared = rows.filter(pl.col("strategy") != UNSPECIFIED).group_by("strategy", "world_size").len()
    repeats = shared.filter(pl.col("len") > 1).sort("strategy", "world_size")
    if repeats.height:
        listed = ", ".join(
            f"{r['strategy']} on {_devices(r['world_size'])} ({r['len']} runs)"
            for r in repeats.iter_rows(named=True)
        )
        text += f" Measured more than once, each run shown on its own: {listed}."
    unnamed = rows.filter(pl.col("strategy") == UNSPECIFIED).height
    if unnamed > 1:
        text += f" {unnamed} runs name no strategy: each is shown on its own, never added to another."
    return text


def best_sentence(rows: pl.DataFrame) -> str:
    """The run with the highest tokens/s per device."""
    rows = rows.filter(pl.col("tokens_per_s_per_device").is_not_null())
    if rows.is_empty():
        return "unknown: no run manifest gives tokens per step (global batch × sequence length)."
    best = rows.sort("tokens_per_s_per_device", descending=True, nulls_last=True).row(0, named=True)
    mfu = f", MFU {best['mfu']:.1%}" if best["mfu"] is not None else ""
    return (
        f"{best['tokens_per_s_per_device']:,.0f} tokens/s per device with {best['strategy']} "
        f"on {_devices(best['world_size'])} (run {best['run_id']}{mfu})."
    )


def first_below(part: pl.DataFrame, limit: float) -> dict | None:
    """The smallest scale point whose same-strategy scaling efficiency is below limit, or None."""
    below = part.filter(pl.col("strategy_scaling_efficiency") < limit).sort("world_size", "run_id")
    return below.row(0, named=True) if below.height else None


def strategy_efficiency_clause(name: str, part: pl.DataFrame) -> str:
    """Where one strategy first drops below 80 % and 50 % of its own baseline, each crossing said once."""
    hits = {limit: first_below(part, limit) for limit in THRESHOLDS}
    marks = []
    for limit, hit in hits.items():
        lower = [h for other, h in hits.items() if other < limit and h is not None]
        # a run below both thresholds is said once, under the lower one
        if hit is not None and all(h["run_id"] != hit["run_id"] for h in lower):
            efficiency = _pct(hit["strategy_scaling_efficiency"])
            marks.append(f"below {limit:.0%} from {hit['world_size']} devices ({efficiency})")
    if not marks:
        marks = [f"never below {max(THRESHOLDS):.0%} (up to {part['world_size'].max()} devices)"]
    elif hits[min(THRESHOLDS)] is None:
        marks.append(f"never below {min(THRESHOLDS):.0%}")
    base = part["strategy_base_world_size"][0]
    return f"{name} against its own {base}-device run: " + ", ".join(marks)


def efficiency_sentence(rows: pl.DataFrame) -> str:
    """Where each strategy's efficiency, against its own smallest scale point, drops below 80 % and 50 %."""
    rows = rows.filter(pl.col("strategy_scaling_efficiency").is_not_null())
    clauses = [
        strategy_efficiency_clause(name, part)
        for name, part in _strategies(rows)
        if part["world_size"].n_unique() >= 2
    ]
    if not clauses:
        return "needs a known throughput at two or more scale points of one strategy."
    return "; ".join(clauses) + "."


MAX_RUNS_SAID = 3


def _dominant_clause(run: dict) -> str:
    if run["compute_frac"] is None or run["step_time_us"] is None:
        return "no measured step"
    shares = {label: run[column] or 0.0 for label, column in PART_COLUMNS.items()}
    leader = max(shares, key=shares.__getitem__)
    rest = ", ".join(f"{label} {_pct(v)}" for label, v in shares.items() if label != leader)
    return (
        f"{leader} dominates, {_pct(shares[leader])} of a {run['step_time_us'] / 1e3:,.1f} ms step ({rest})"
    )


def dominant_sentence(rows: pl.DataFrame) -> str:
    """What takes most of the step in each run at each strategy's largest scale point, with the full split."""
    clauses = []
    for name, part in _strategies(rows):
        size = part["world_size"].max()
        runs = part.filter(pl.col("world_size") == size).sort("run_id")
        said = [
            f"{r['run_id']}: {_dominant_clause(r)}" for r in runs.head(MAX_RUNS_SAID).iter_rows(named=True)
        ]
        more = f"; and {runs.height - MAX_RUNS_SAID} more runs" if runs.height > MAX_RUNS_SAID else ""
        if runs.height == 1:
            said = [f"({runs['run_id'][0]}) {_dominant_clause(runs.row(0, named=True))}"]
        clauses.append(f"{name} on {_devices(size)} " + "; ".join(said) + more)
    return ". ".join(clauses) + "."
