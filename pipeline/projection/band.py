"""How far to trust a projected point: a band around its step time from the study's own checks.

A check is a projection of one run to a world size at which the study measured another run of the
same workload (same strategy, tp, pp and tokens per step; `project.same_workload`), replayed
without the scenario's what-ifs: its error is ln(projected / measured step time). The band widens
with the distance projected, in doublings of the world size: the study's rate is the worst
check's |error| per doubling it spans (the worst, not a mean: a study has a few checks, and a
band is a bound a reader acts on). A point `d` doublings from its run's measured world size lies
within a factor exp(replay + rate x d) of its step time, replay being the replay's own largest
error at the measured size; at the measured size the band is the replay's alone.

A study without checks (one world size per workload) takes DEFAULT_RATE, the worst error of
tracehouse's own validation (docs/projection.md, "Validation"), and says so (`basis`).

A change of layout (DDP as FSDP, or back; tensor parallelism added) errs even at the measured world
size, which no rate per doubling can say: its points' band widens by the worst |error| of a run
projected with a changed layout to its own world size where the study measured that layout
(`layout_error`), else by DEFAULT_LAYOUT_ERROR.
What a what-if changes (faster compute, compression, another element type) has no measurement to
check against: its band is the one of the measurable projection (docs/projection.md, "How far to
trust a projection").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import astuple, dataclass, replace

import duckdb
from tracehouse.pipeline.warehouse.meta import has_relation
from tracehouse.pipeline.warehouse.sql_runner import raw_ddl

# ln(21.59 / 16.10): DDP projected from world size 1 to 2 on CPU was 25.4 % short, the worst step
# time of the validation (docs/projection.md, "Validation"; benchmarks/projection.py).
DEFAULT_RATE = 0.293
DEFAULT_BASIS = "default: tracehouse's own validation (DDP world size 1 to 2 on CPU, 25.4 % short)"
# ln(65.77 / 47.99): the sample's fsdp-ws2 projected as DDP at 2 ranks against ddp-ws2, the worst
# change of kind at a run's own world size in the validation (docs/projection.md, "A change of layout").
DEFAULT_LAYOUT_ERROR = 0.315
DEFAULT_LAYOUT_BASIS = "default: tracehouse's own validation (FSDP as DDP at 2 ranks on CPU, 37.0 % long)"


@dataclass(frozen=True)
class Check:
    """One run projected to a world size at which another run of the same workload was measured."""

    study: str
    run_id: str
    world_size: int  # the run's measured world size
    check_world_size: int  # where it was projected, and the other run measured
    measured_run_id: str
    projected_step_time_us: float
    measured_step_time_us: float

    @property
    def error(self) -> float:
        """ln(projected / measured): 0 when exact, symmetric for over- and under-estimates."""
        return math.log(self.projected_step_time_us / self.measured_step_time_us)

    @property
    def doublings(self) -> float:
        return abs(math.log2(self.check_world_size / self.world_size))

    @property
    def rate(self) -> float:
        """|error| per doubling spanned."""
        return abs(self.error) / self.doublings


@dataclass(frozen=True)
class Band:
    """The study's error rate per doubling, and what it rests on."""

    rate: float
    basis: str
    checks: tuple[Check, ...] = ()
    layout_error: float = 0.0  # added where a point changes the data-parallel kind (`with_layout_error`)
    layout_basis: str | None = None

    def factor(
        self, world_size: int, measured_world_size: int, replay_error: float, changes_kind: bool = False
    ) -> float:
        """The point's step time lies within [step / factor, step x factor]."""
        doublings = abs(math.log2(world_size / measured_world_size))
        layout = self.layout_error if changes_kind else 0.0
        return math.exp(replay_error + self.rate * doublings + layout)

    def summary(self) -> dict:
        """The band's part of a point's provenance (JSON)."""
        worst = max(self.checks, key=lambda c: c.rate, default=None)
        return {
            "rate_per_doubling": self.rate,
            "basis": self.basis,
            "layout_error": self.layout_error if self.layout_basis else None,
            "layout_basis": self.layout_basis,
            "checks": len(self.checks),
            "worst": None
            if worst is None
            else {
                "run": worst.run_id,
                "from": worst.world_size,
                "to": worst.check_world_size,
                "measured_run": worst.measured_run_id,
                "error": worst.error,
            },
        }


def study_band(checks: Iterable[Check]) -> Band:
    """The band of a study's projections from its checks (DEFAULT_RATE when it has none)."""
    usable = tuple(
        c
        for c in checks
        if c.projected_step_time_us > 0 and c.measured_step_time_us > 0 and c.world_size != c.check_world_size
    )
    if not usable:
        return Band(DEFAULT_RATE, DEFAULT_BASIS)
    runs = len({c.run_id for c in usable})
    basis = f"study: {len(usable)} check(s) of {runs} run(s) against the study's measured runs"
    return Band(max(c.rate for c in usable), basis, usable)


def with_layout_error(band: Band, checks: Iterable[Check]) -> Band:
    """The band of a projection that changes the data-parallel kind: `checks` are its own, of the
    projected kind; those at the run's own world size give the layout error (DEFAULT_LAYOUT_ERROR
    without one)."""
    same_size = [c for c in checks if c.world_size == c.check_world_size and c.projected_step_time_us > 0]
    if not same_size:
        return replace(band, layout_error=DEFAULT_LAYOUT_ERROR, layout_basis=DEFAULT_LAYOUT_BASIS)
    worst = max(same_size, key=lambda c: abs(c.error))
    basis = (
        f"study: {len(same_size)} run(s) projected with a changed layout at their own world "
        f"size, worst {worst.run_id} against {worst.measured_run_id} ({100 * math.expm1(worst.error):+.1f} %)"
    )
    return replace(band, layout_error=abs(worst.error), layout_basis=basis)


CHECK_COLUMNS = (
    "study, run_id, world_size, check_world_size, measured_run_id, "
    "projected_step_time_us, measured_step_time_us"
)


def read_checks(connection: duckdb.DuckDBPyConnection, study: str) -> list[Check]:
    """The study's stored checks (none in a warehouse made before the table)."""
    if not has_relation(connection, "projection_checks"):
        return []
    rows = connection.execute(
        f"SELECT {CHECK_COLUMNS} FROM projection_checks WHERE study = ? ORDER BY ALL", [study]
    ).fetchall()
    return [Check(*row) for row in rows]


def store_checks(
    connection: duckdb.DuckDBPyConnection, study: str, runs: Iterable[str], checks: list[Check]
) -> None:
    """Replace the checks of the projected runs (in the caller's transaction)."""
    connection.execute(raw_ddl("projection_checks"))
    for run in runs:
        connection.execute("DELETE FROM projection_checks WHERE study = ? AND run_id = ?", [study, run])
    if checks:
        connection.executemany(
            f"INSERT INTO projection_checks ({CHECK_COLUMNS}, log_error, doublings, checked_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)",
            [[*astuple(c), c.error, c.doublings] for c in checks],
        )
