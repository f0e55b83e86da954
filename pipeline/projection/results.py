"""What a projection returns: each run's identity check and projected points, and a study's
projected runs with the runs it could not project. Each shows itself as a table in a notebook
(`_repr_html_`, a one-line `repr`) and gives its points as a frame (`.pl()`, `.df()`)."""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import TYPE_CHECKING, Any

import polars as pl
from tracehouse.pipeline.projection.band import Band, Check
from tracehouse.pipeline.projection.search import Ranking, rank_layouts
from tracehouse.pipeline.projection.timeline import RunFacts

if TYPE_CHECKING:
    import pandas as pd
    from tracehouse.pipeline.projection.interference import Interference

# The columns a notebook table shows (all of them are in `.pl()`).
SHOWN = (
    "world_size",
    "layout",
    "step_time_us",
    "step_time_low_us",
    "step_time_high_us",
    "measured_step_time_us",
    "tokens_per_s_per_device",
    "measured_tokens_per_s_per_device",
    "scaling_efficiency",
    "compute_frac",
    "exposed_comm_frac",
    "idle_frac",
    "knee",
    "flag",
)


@dataclass(frozen=True)
class IdentityCheck:
    """The replay with the measured durations against the measured step times (slowest rank)."""

    steps: dict[int | None, tuple[float, float]]  # step -> (measured µs, replayed µs)

    @property
    def errors(self) -> list[float]:
        return [abs(r - m) / m for m, r in self.steps.values() if m > 0]

    @property
    def median_error(self) -> float:
        return median(self.errors) if self.errors else 0.0

    @property
    def max_error(self) -> float:
        return max(self.errors, default=0.0)


@dataclass(frozen=True, kw_only=True)
class ProjectedPoint:
    """One row of `projections` (sql/raw/projections.sql)."""

    study: str
    run_id: str
    scenario: str
    assumptions: str
    notes: str | None
    world_size: int
    layout: str  # the projected layout as --layout writes it (layouts.layout_text), e.g. "fsdp=64,tp=2"
    measured_world_size: int
    step_time_us: float
    measured_step_time_us: float | None
    measured_run_id: str | None
    measured_tokens_per_s_per_device: float | None
    tokens_per_s: float | None
    tokens_per_s_per_device: float | None
    scaling_efficiency: float | None
    marginal_tokens_per_s_per_device: float | None
    knee: bool
    knee_note: str
    flag: str | None  # why the point is no runnable configuration (None: it is)
    compute_frac: float
    exposed_comm_frac: float
    other_frac: float
    idle_frac: float
    exposed_comm_dp_frac: float
    exposed_comm_tp_frac: float
    exposed_comm_pp_frac: float
    exposed_comm_other_frac: float
    step_time_low_us: float | None = None  # the error band (band.py): step / factor
    step_time_high_us: float | None = None  # step x factor
    memory_bytes: float | None = None  # per device (memory.py); a lower bound without measured activations
    memory_capacity_bytes: float | None = None  # the device's memory (None: unknown)
    provenance: str | None = None  # JSON: what the point rests on (project.provenance)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _frame(points: list[ProjectedPoint]) -> pl.DataFrame:
    """One row per point, every column typed even when all its values are NULL."""
    types = {"int": pl.Int64, "bool": pl.Boolean, "str": pl.String, "str | None": pl.String}
    schema = {
        name: types.get(str(f.type), pl.Float64) for name, f in ProjectedPoint.__dataclass_fields__.items()
    }
    return pl.DataFrame([p.to_dict() for p in points], schema=schema)


@dataclass(frozen=True)
class RunProjection:
    """A run's identity check, its projected points in world-size order, and the world sizes it
    was not projected to with the reason (also in `notes`, which the rows store)."""

    facts: RunFacts
    identity: IdentityCheck
    points: list[ProjectedPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the projection leaves out, in words
    refused: dict[int, str] = field(default_factory=dict)  # world size -> why not projected
    checks: list[Check] = field(default_factory=list)  # against the study's other measured runs (band.py)
    as_kind: str | None = None  # the layout changed: "fsdp" (as the other kind), "ddp,tp=2" (tp added), ...

    @property
    def label(self) -> str:
        """The run, and the kind it was projected as where that is not its own ("ddp-ws2 as fsdp")."""
        return self.facts.run_id if self.as_kind is None else f"{self.facts.run_id} as {self.as_kind}"

    @property
    def knee(self) -> int | None:
        return next((p.world_size for p in self.points if p.knee), None)

    @property
    def knee_note(self) -> str:
        """The knee in words, or why it cannot be found."""
        return self.points[0].knee_note if self.points else "knee unknown: nothing was projected"

    def pl(self) -> pl.DataFrame:
        """The points as a Polars frame, one row per world size (the `projections` columns)."""
        return _frame(self.points)

    def df(self) -> pd.DataFrame:
        """The points as a pandas frame."""
        return self.pl().to_pandas()

    def __repr__(self) -> str:
        f = self.facts
        return (
            f"<RunProjection {f.study}/{self.label}: measured at {f.world_size} device(s), "
            f"{len(self.points)} point(s), {self.knee_note}>"
        )

    def _repr_html_(self) -> str:
        f = self.facts
        head = (
            f"<p><b>{html.escape(f'{f.study}/{f.run_id}')}</b> (measured at {f.world_size} device(s)): "
            f"replay of the measured steps within {100 * self.identity.median_error:.2f} % median, "
            f"{100 * self.identity.max_error:.2f} % max; {html.escape(self.knee_note)}</p>"
        )
        frame = self.pl()
        table = frame.select([c for c in SHOWN if c in frame.columns])._repr_html_() if self.points else ""
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.notes)
        return head + table + (f"<ul>{items}</ul>" if items else "")


class Projections(list):
    """The projected runs of one call (a list of RunProjection) and the runs that could not be
    projected, each with its one-line reason (`failed`: run id -> reason)."""

    def __init__(self, runs: Iterable[RunProjection] = (), failed: dict[str, str] | None = None) -> None:
        super().__init__(runs)
        self.failed: dict[str, str] = dict(failed or {})
        self.interference: list[Interference] = []  # the fit per device type (projection/interference.py)
        self.band: Band | None = None  # the study's error band (projection/band.py)
        self.power_w: dict[str, float] = {}  # run -> measured average power per device (W), where sampled

    def ranking(self, world_size: int) -> Ranking:
        """The runs' layouts at one projected world size, best projected tokens/s first (as
        `tracehouse project --search` ranks them), with the runs not ranked and why."""
        return rank_layouts(self, world_size, self.power_w)

    def pl(self) -> pl.DataFrame:
        """Every projected point of every run, one row each."""
        return _frame([p for run in self for p in run.points])

    def df(self) -> pd.DataFrame:
        """The points as a pandas frame."""
        return self.pl().to_pandas()

    def __repr__(self) -> str:
        runs = ", ".join(r.label for r in self)
        failed = f"; not projected: {', '.join(self.failed)}" if self.failed else ""
        return f"<Projections of {len(self)} run(s): {runs}{failed}>"

    def _repr_html_(self) -> str:
        parts = [run._repr_html_() for run in self]
        if self.failed:
            items = "".join(
                f"<li>{html.escape(run)}: {html.escape(why)}</li>" for run, why in self.failed.items()
            )
            parts.append(f"<p>Not projected:</p><ul>{items}</ul>")
        return "".join(parts) or "<p>no run projected</p>"
