"""What a calibration sweep measured, as rank 0 hands it back (no torch here).

Units are in the names: time in microseconds, bandwidths in GB/s (10^9 bytes per second),
sizes in bytes, as nccl-tests prints them.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class RankInfo:
    """One rank as nccl-tests' `# Using devices` block lists it."""

    rank: int
    pid: int
    host: str  # socket.gethostname() of that rank's process
    device: int  # CUDA device index; on CPU the local rank
    bus_id: str  # PCI id as 0000:1b:00 on a GPU, "cpu" otherwise
    name: str  # device (or CPU model) name
    group: int = 0


@dataclass(frozen=True, kw_only=True)
class Placement:
    """One timed placement (out-of-place or in-place) of one size."""

    time_us: float  # mean per iteration, the slowest rank's, less the per-call overhead (transfer_time)
    algbw_gbps: float  # from time_us
    busbw_gbps: float
    wrong: int | None  # wrong elements summed over ranks; None: not validated (printed N/A)
    measured_time_us: float | None = None  # before the per-call overhead was taken out


@dataclass(frozen=True, kw_only=True)
class SizeRow:
    """One row of an nccl-tests table."""

    size_bytes: int  # what nccl-tests prints: max(send, receive) bytes per rank
    count: int  # elements, as nccl-tests prints them (per rank for gather, scatter, alltoall)
    dtype: str
    redop: str
    root: int
    out_of_place: Placement
    in_place: Placement

    def placements(self) -> tuple[Placement, Placement]:
        """Out-of-place, then in-place."""
        return self.out_of_place, self.in_place


@dataclass(frozen=True, kw_only=True)
class OpTable:
    """Every size of one collective."""

    op: str  # a key of spec.OPS
    rows: tuple[SizeRow, ...]

    @property
    def avg_busbw_gbps(self) -> float:
        """Mean bus bandwidth over every row and placement (nccl-tests' `Avg bus bandwidth`)."""
        values = [p.busbw_gbps for row in self.rows for p in row.placements()]
        return sum(values) / len(values) if values else 0.0

    @property
    def out_of_bounds(self) -> int:
        """Placements with any wrong element (nccl-tests' `Out of bounds values`)."""
        return sum(1 for row in self.rows for p in row.placements() if p.wrong)


@dataclass(frozen=True, kw_only=True)
class CalibrationResult:
    """Rank 0's record of the whole sweep."""

    backend: str
    torch_version: str
    nccl_version: str | None
    ranks: tuple[RankInfo, ...]
    tables: tuple[OpTable, ...]
    skipped: dict[str, str] = field(default_factory=dict)  # op -> why it was not measured
    # host time of one call that moves nothing (Python, c10d, the backend's call), taken out of
    # every time: the replay counts a traced call's host time apart from its transfer
    call_overhead_us: float = 0.0

    def uncorrected(self) -> dict[str, list[list[float | None]]]:
        """Per op, per size: the (out-of-place, in-place) times before the overhead was taken out."""
        return {
            table.op: [[p.measured_time_us for p in row.placements()] for row in table.rows]
            for table in self.tables
        }

    @property
    def hosts(self) -> list[str]:
        """The distinct host names, in rank order of first appearance."""
        return list(dict.fromkeys(rank.host for rank in self.ranks))

    def write(self, path: Path) -> None:
        """Write the result as JSON."""
        path.write_text(json.dumps(dataclasses.asdict(self), indent=1) + "\n")

    @classmethod
    def read(cls, path: Path) -> CalibrationResult:
        """Read a result written by `write`."""
        data: dict[str, Any] = json.loads(path.read_text())
        tables = tuple(
            OpTable(
                op=table["op"],
                rows=tuple(
                    SizeRow(
                        **{
                            **row,
                            "out_of_place": Placement(**row["out_of_place"]),
                            "in_place": Placement(**row["in_place"]),
                        }
                    )
                    for row in table["rows"]
                ),
            )
            for table in data["tables"]
        )
        return cls(
            backend=data["backend"],
            torch_version=data["torch_version"],
            nccl_version=data["nccl_version"],
            ranks=tuple(RankInfo(**rank) for rank in data["ranks"]),
            tables=tables,
            skipped=data["skipped"],
            call_overhead_us=data.get("call_overhead_us", 0.0),
        )
