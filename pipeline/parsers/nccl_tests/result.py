"""What `parse_nccl_tests` returns: the tests of one file, each with its points, and their frame.

POINT_COLUMNS is the one declaration of the columns a file's points become (the warehouse table
`network_curve_points` adds the keys content_hash, study, path and source; a test checks its
SQL against this).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import polars as pl

POINT_COLUMNS: dict[str, pl.DataType] = {
    "test_index": pl.Int32,  # 0-based position of the test in the file (a file may hold several)
    "program": pl.String,  # the nccl-tests binary, e.g. all_reduce_perf
    "program_from": pl.String,  # header, file name or busbw/algbw
    "op": pl.String,  # the collective, in the project's vocabulary (comm_names.OPS)
    "ranks": pl.Int32,
    "ranks_from": pl.String,  # rank lines or busbw/algbw; NULL with ranks
    "nodes": pl.Int32,  # distinct hosts in the rank lines; NULL without them
    "devices": pl.String,  # JSON array of the distinct device names in the rank lines
    "nccl_version": pl.String,
    "avg_busbw_gbps": pl.Float64,  # the test's `# Avg bus bandwidth` line
    "line": pl.Int32,  # 1-based line of the file holding the row
    "bytes": pl.Int64,
    "count": pl.Int64,  # elements
    "dtype": pl.String,  # torch name (nccl-tests' float is float32)
    "redop": pl.String,  # NULL when the op does not reduce (printed none, or left blank)
    "root": pl.Int32,  # NULL when the op has no root (printed -1, or no root column)
    "in_place": pl.Boolean,
    "time_us": pl.Float64,
    "algbw_gbps": pl.Float64,
    "busbw_gbps": pl.Float64,
    "wrong": pl.Int64,  # the #wrong column (newer layouts); NULL for N/A or an old layout
    "error": pl.Float64,  # the error column (old layouts); NULL for N/A or a newer layout
}


@dataclass(frozen=True, kw_only=True)
class NcclPoint:
    """One measurement: one message size, placed out of place or in place."""

    line: int
    bytes: int
    count: int
    dtype: str | None
    redop: str | None
    root: int | None
    in_place: bool
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    error: float | None


@dataclass(frozen=True, kw_only=True)
class NcclTest:
    """One run of one nccl-tests program: what its header says and its points (none if it failed)."""

    program: str | None
    program_from: str | None
    op: str | None
    ranks: int | None
    ranks_from: str | None
    hosts: tuple[str, ...]  # per rank line, in rank order
    devices: tuple[str, ...]  # per rank line, in rank order
    nccl_version: str | None
    avg_busbw_gbps: float | None
    failure: str | None  # the first failure message the test printed
    points: tuple[NcclPoint, ...]

    @property
    def nodes(self) -> int | None:
        """Distinct hosts of the rank lines; None without rank lines."""
        return len(set(self.hosts)) or None


@dataclass(frozen=True, kw_only=True)
class NcclTestsResult:
    """Every test of one nccl-tests output file."""

    path: str
    tests: tuple[NcclTest, ...]
    dropped: tuple[tuple[str, int], ...] = ()  # (why, how many) result rows were dropped

    def dropped_lines(self) -> list[str]:
        """One line saying how many result rows were dropped and why, or none."""
        if not self.dropped:
            return []
        total = sum(n for _, n in self.dropped)
        return [f"{total} result rows dropped: " + ", ".join(f"{why} ({n})" for why, n in self.dropped)]

    @property
    def n_points(self) -> int:
        """Points over all tests."""
        return sum(len(test.points) for test in self.tests)

    def failures(self) -> list[str]:
        """One line per test that printed a failure, naming its program."""
        return [f"{t.program or 'a test'} failed: {t.failure!r}" for t in self.tests if t.failure]

    def frame(self) -> pl.DataFrame:
        """One row per point, with exactly the POINT_COLUMNS."""
        rows = [
            {
                "test_index": index,
                "program": test.program,
                "program_from": test.program_from,
                "op": test.op,
                "ranks": test.ranks,
                "ranks_from": test.ranks_from,
                "nodes": test.nodes,
                "devices": json.dumps(list(dict.fromkeys(test.devices))),
                "nccl_version": test.nccl_version,
                "avg_busbw_gbps": test.avg_busbw_gbps,
                **vars(point),
            }
            for index, test in enumerate(self.tests)
            for point in test.points
        ]
        return pl.DataFrame(rows, schema=POINT_COLUMNS)
