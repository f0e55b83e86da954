"""What discovery finds: trace, power and nccl-tests jobs, the runs they belong to, and per-path problems."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tracehouse.pipeline.common.manifest import RunManifest


@dataclass(frozen=True, kw_only=True)
class TraceJob:
    """One rank trace to parse, with what is known of it before parsing."""

    path: Path
    study: str
    run_id: str
    rank: int | None  # None: take distributedInfo.rank after parsing
    rank_source: str | None  # manifest | option
    single_process: bool = False  # its run's only trace: without distributedInfo it is rank 0


@dataclass(frozen=True, kw_only=True)
class PowerJob:
    """One power log listed in a run manifest."""

    path: Path
    study: str
    run_id: str
    host: str | None


@dataclass(frozen=True, kw_only=True)
class NcclTestsJob:
    """One nccl-tests output file (network calibration points; it belongs to a study, not to a run)."""

    path: Path
    study: str


@dataclass(frozen=True, kw_only=True)
class RunSource:
    """A run and the manifest that defines it (`path` None: stated on the command line)."""

    manifest: RunManifest
    path: Path | None


@dataclass(kw_only=True)
class Discovery:
    """Everything found under the given paths, plus one-line problems keyed by path."""

    traces: list[TraceJob] = field(default_factory=list)
    power: list[PowerJob] = field(default_factory=list)
    nccl_tests: list[NcclTestsJob] = field(default_factory=list)
    runs: list[RunSource] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    not_traces: list[str] = field(default_factory=list)  # JSON files found by searching that are no trace
