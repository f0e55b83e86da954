"""What one ingest did: counts, failures and time taken (the CLI prints it, `--json` as JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported by every training rank with `tracehouse`: frames load on use only
    import pandas as pd
    import polars as pl

SHOWN_RUNS = 12  # runs named on the terminal; --json lists them all


@dataclass(kw_only=True)
class IngestSummary:
    """The result of one ingest: counts, failures (path and one-line reason) and time taken."""

    warehouse: str
    loaded: int = 0
    skipped: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    internal_errors: list[str] = field(default_factory=list)  # failed paths whose cause is a tracehouse bug
    not_traces: list[str] = field(default_factory=list)  # JSON files found by searching, skipped: no trace
    warnings: list[str] = field(
        default_factory=list
    )  # loaded files with a caveat: no breakdown, a failed test
    events: int = 0
    power_files: int = 0
    nccl_tests_files: int = 0  # nccl-tests output files loaded (their points: network_curves)
    seconds: float = 0.0
    runs: list[str] = field(default_factory=list)  # "study/run_id" of every run the given paths hold
    repaired: list[str] = field(
        default_factory=list
    )  # registered files whose damaged partitions were re-written
    # The driver's CPU seconds (every thread of its process, DuckDB's included) spent registering
    # the tasks' outcomes and refreshing the materialized tables: what a cluster cannot spread.
    driver_cpu_s: dict[str, float] = field(default_factory=lambda: {"register": 0.0, "refresh": 0.0})
    # Wall seconds of the driver's phases: discover (the paths searched), catalog (to the tasks'
    # start), tasks (to the last outcome registered), register (inside tasks: the catalog phases
    # that registered outcomes), refresh (the views and materialized tables).
    phase_s: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(("discover", "catalog", "tasks", "register", "refresh"), 0.0)
    )
    runs_refreshed: int = 0  # runs whose materialized rows this ingest recomputed (files loaded into them)

    @property
    def exit_code(self) -> int:
        """0 when every file loaded or was skipped, 1 when any failed."""
        return 1 if self.failed else 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "warehouse": self.warehouse,
            "loaded": self.loaded,
            "skipped": self.skipped,
            "failed": [
                {"path": p, "reason": r, "internal": p in self.internal_errors} for p, r in self.failed
            ],
            "not_traces": list(self.not_traces),
            "warnings": list(self.warnings),
            "events": self.events,
            "power_files": self.power_files,
            "nccl_tests_files": self.nccl_tests_files,
            "seconds": round(self.seconds, 3),
            "runs": list(self.runs),
            "repaired": list(self.repaired),
            "driver_cpu_s": {phase: round(cpu, 4) for phase, cpu in self.driver_cpu_s.items()},
            "phase_s": {phase: round(wall, 4) for phase, wall in self.phase_s.items()},
            "runs_refreshed": self.runs_refreshed,
        }

    def notice_lines(self, prefix: str) -> list[str]:
        """Files skipped as no trace, then warnings of loaded traces without a (full) breakdown."""
        lines = [f"{prefix}: not a trace, skipped: {path}" for path in self.not_traces]
        return lines + [f"{prefix}: warning: {warning}" for warning in self.warnings]

    def runs_lines(self, prefix: str) -> list[str]:
        """The runs the traces went into, by name, at most SHOWN_RUNS of them."""
        if not self.runs:
            return []
        shown = ", ".join(self.runs[:SHOWN_RUNS])
        more = f" and {len(self.runs) - SHOWN_RUNS} more" if len(self.runs) > SHOWN_RUNS else ""
        return [f"{prefix}: {len(self.runs)} run{'s' if len(self.runs) != 1 else ''}: {shown}{more}"]

    def __repr__(self) -> str:
        """The closing counts on one line (the fields are attributes: summary.failed, ...)."""
        return f"IngestSummary({self.counts_line()})"

    def _repr_html_(self) -> str:
        """The counts, then the failed files, the runs and the notices, as tables (a notebook shows this)."""
        from tracehouse.pipeline.display import html_table

        counts = [
            ("loaded", self.loaded),
            ("repaired", len(self.repaired)),
            ("skipped", self.skipped),
            ("failed", len(self.failed)),
            ("not a trace", len(self.not_traces)),
            ("events", self.events),
            ("power logs", self.power_files),
            ("nccl-tests files", self.nccl_tests_files),
            ("seconds", self.seconds),
        ]
        parts = [html_table(("", "files"), counts, f"tracehouse ingest -> {self.warehouse}")]
        if self.failed:
            parts.append(html_table(("path", "reason", "internal"), self._failure_rows(), "failed"))
        if self.runs:
            parts.append(html_table(("run",), [(run,) for run in self.runs], "runs"))
        if self.not_traces or self.warnings:
            parts.append(html_table(("notice",), [(line,) for line in self.notice_lines("")], "notices"))
        return "".join(parts)

    def pl(self) -> pl.DataFrame:
        """The failed files as a Polars frame: path, reason, internal (a tracehouse bug)."""
        import polars as pl

        return pl.DataFrame(self._failure_rows(), schema=["path", "reason", "internal"], orient="row").cast(
            {"internal": pl.Boolean}
        )

    def df(self) -> pd.DataFrame:
        """The failed files as a pandas frame (needs pandas)."""
        return self.pl().to_pandas()

    def _failure_rows(self) -> list[tuple[str, str, bool]]:
        return [(path, reason, path in self.internal_errors) for path, reason in self.failed]

    def counts_line(self) -> str:
        """Loaded, repaired, skipped, failed, events and time, and the warehouse, on one line."""
        not_traces = f", {len(self.not_traces)} not a trace" if self.not_traces else ""
        nccl_tests = f", {self.nccl_tests_files} nccl-tests files" if self.nccl_tests_files else ""
        repaired = f", {len(self.repaired)} repaired" if self.repaired else ""
        return (
            f"{self.loaded} loaded{repaired}, {self.skipped} skipped, {len(self.failed)} failed{not_traces}, "
            f"{self.events} events, {self.power_files} power logs{nccl_tests} in {self.seconds:.1f} s "
            f"-> {self.warehouse}"
        )

    def report_lines(self, prefix: str) -> list[str]:
        """What the terminal shows after the files: the notices, then the closing counts."""
        return [*self.notice_lines(prefix), *self.runs_lines(prefix), f"{prefix}: {self.counts_line()}"]
