"""Which of a study's measured layouts to run at a world size: each run projected there, ranked.

`tracehouse project --search` projects every run of the study (each a layout: its strategy and
tp x pp, data parallelism grown to fill the world size) and ranks those with a runnable point by
projected tokens/s, each with its error band (band.py), its tokens per joule where the run
measured power (each device drawing the run's measured average power per device: a device
waiting on the network draws less, so this is a lower bound on tokens per joule), and its exposed
communication. A run not projected there, a point that is no runnable configuration (`flag`:
less than one sequence per rank, or more memory per device than the device has, memory.py) and a
run without throughput (no tokens per step) are listed with the reason, never ranked. Where the
device's memory is unknown (a CPU run, a device the hardware table lacks, no --device-memory) or
the model's size is (no manifest), a ranked layout's fit is unchecked, and the ranking says so.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import duckdb
import polars as pl


class ProjectedRuns(Protocol):
    """What the ranking reads of `results.Projections` (which imports this module): its runs
    (`RunProjection`: facts, points, refused, label) and the runs that could not be projected."""

    failed: dict[str, str]

    def __iter__(self) -> Iterator[Any]: ...


@dataclass(frozen=True)
class Candidate:
    """One run's layout projected to the world size, with what the ranking reads."""

    run_id: str
    layout: str  # as --layout writes it (layouts.layout_text), e.g. "fsdp=256,tp=2"
    tokens_per_step: int | None
    tokens_per_s: float
    tokens_per_s_low: float  # the error band (band.py), inverted from the step time's
    tokens_per_s_high: float
    tokens_per_s_per_device: float
    tokens_per_j: float | None  # None: the run measured no power
    exposed_comm_frac: float
    memory_bytes: float | None  # per device (memory.py); None: the model's size is unknown
    memory_capacity_bytes: float | None  # None: the device's memory is unknown (fit unchecked)


@dataclass(frozen=True)
class Ranking:
    """The study's layouts at one world size, best projected tokens/s first, and the runs left out."""

    world_size: int
    candidates: list[Candidate]
    left_out: dict[str, str] = field(default_factory=dict)  # run -> why it is not ranked

    @property
    def memory(self) -> str:
        """Whether the ranked layouts were checked against their devices' memory, in words."""
        unchecked = [
            c.run_id for c in self.candidates if c.memory_bytes is None or c.memory_capacity_bytes is None
        ]
        if not unchecked:
            return "memory: every ranked layout fits its devices"
        return (
            f"memory fit unchecked for {', '.join(unchecked)}: the device's memory (state it with "
            "--device-memory) or the model's size (a manifest's n_params and dtype) is unknown"
        )

    @property
    def most_tokens_per_j(self) -> Candidate | None:
        measured = [c for c in self.candidates if c.tokens_per_j is not None]
        return max(measured, key=lambda c: c.tokens_per_j, default=None)

    def pl(self) -> pl.DataFrame:
        """The ranked layouts, best first, one row each."""
        fields = list(Candidate.__dataclass_fields__)
        return pl.DataFrame([asdict(c) for c in self.candidates], schema=fields, orient="row")

    def __repr__(self) -> str:
        best = self.candidates[0] if self.candidates else None
        first = f", first {best.run_id} {best.layout} ({best.tokens_per_s:,.0f} tokens/s)" if best else ""
        left = f", {len(self.left_out)} not ranked" if self.left_out else ""
        return f"<Ranking at {self.world_size:,} devices: {len(self.candidates)} layout(s){first}{left}>"

    def _repr_html_(self) -> str:
        head = (
            f"<p><b>{len(self.candidates)} layout(s) at {self.world_size:,} devices</b>, "
            "best projected tokens/s first</p>"
        )
        items = "".join(
            f"<li>{html.escape(run)}: {html.escape(why)}</li>" for run, why in self.left_out.items()
        )
        left = f"<p>Not ranked:</p><ul>{items}</ul>" if items else ""
        return head + self.pl()._repr_html_() + left + f"<p>{html.escape(self.memory)}</p>"

    def to_dict(self) -> dict:
        return {
            "world_size": self.world_size,
            "candidates": [asdict(c) for c in self.candidates],
            "left_out": self.left_out,
            "most_tokens_per_j": None if self.most_tokens_per_j is None else self.most_tokens_per_j.run_id,
            "memory": self.memory,
        }


def measured_power(connection: duckdb.DuckDBPyConnection, study: str) -> dict[str, float]:
    """Each run's measured average power per device (W), where it has power samples."""
    rows = connection.execute(
        "SELECT run_id, avg_power_w_per_device FROM scale_points "
        "WHERE study = ? AND avg_power_w_per_device > 0",
        [study],
    ).fetchall()
    return dict(rows)


def rank_layouts(projections: ProjectedRuns, world_size: int, power_w: dict[str, float]) -> Ranking:
    """The runs' points at the world size, ranked by projected tokens/s (ties: tokens per joule)."""
    candidates: list[Candidate] = []
    left_out = {run: f"not projected: {why}" for run, why in projections.failed.items()}
    for run in projections:
        f = run.facts
        point = next((p for p in run.points if p.world_size == world_size), None)
        if point is None:
            left_out[run.label] = (
                f"not projected at {world_size}: {run.refused.get(world_size, 'see its notes')}"
            )
        elif point.flag is not None:
            left_out[run.label] = f"no runnable configuration: {point.flag}"
        elif not point.tokens_per_s:
            left_out[run.label] = "no throughput: its manifest gives no tokens per step"
        else:
            factor = (point.step_time_high_us or point.step_time_us) / point.step_time_us
            watts = power_w.get(f.run_id)
            candidates.append(
                Candidate(
                    run_id=f.run_id,
                    layout=point.layout,
                    tokens_per_step=f.tokens_per_step,
                    tokens_per_s=float(point.tokens_per_s),
                    tokens_per_s_low=float(point.tokens_per_s / factor),
                    tokens_per_s_high=float(point.tokens_per_s * factor),
                    tokens_per_s_per_device=float(point.tokens_per_s / world_size),
                    tokens_per_j=float(point.tokens_per_s / (watts * world_size)) if watts else None,
                    exposed_comm_frac=float(point.exposed_comm_frac),
                    memory_bytes=point.memory_bytes,
                    memory_capacity_bytes=point.memory_capacity_bytes,
                )
            )
    candidates.sort(key=lambda c: (-c.tokens_per_s, -(c.tokens_per_j or 0.0), c.run_id, c.layout))
    return Ranking(world_size, candidates, dict(sorted(left_out.items())))
