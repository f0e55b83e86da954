"""What a calibration sweep measures: the collectives, their sizes and iterations (no torch here).

The op table follows nccl-tests (src/*.cu): the program each op's file is named after, the
redop and root its rows print, how a size in bytes becomes the send, receive and printed
element counts, and the factor that turns algorithm bandwidth into bus bandwidth.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DTYPE = "float"  # fp32, as nccl-tests names it
DTYPE_BYTES = 4
BACKENDS = ("gloo", "nccl")
# Default sweep per backend, (min_bytes, max_bytes): gloo on CPU stays well under a minute at
# world size 2 on two cores; NCCL covers the latency and the bandwidth regime.
DEFAULT_SIZES = {"gloo": (1024, 4 * 1024 * 1024), "nccl": (1024, 1024 * 1024 * 1024)}
DEFAULT_ITERS = 20  # nccl-tests' -n
DEFAULT_WARMUP = 5  # nccl-tests' -w
DEFAULT_TIMEOUT_S = 600.0
# Rank 0 starts each progress line with this, for the launcher to pick it out of torchrun's output.
PROGRESS_MARK = "tracehouse-calibrate-progress: "


def _whole(count: int, n: int) -> tuple[int, int, int]:
    return count, count, count


def _gather(count: int, n: int) -> tuple[int, int, int]:
    return count // n, (count // n) * n, count // n


def _scatter(count: int, n: int) -> tuple[int, int, int]:
    return (count // n) * n, count // n, count // n


def _alltoall(count: int, n: int) -> tuple[int, int, int]:
    return (count // n) * n, (count // n) * n, count // n


@dataclass(frozen=True)
class CollectiveOp:
    """One nccl-tests program: how its rows are labelled, sized and converted to bus bandwidth."""

    name: str  # nccl-tests' name, also the --ops spelling: all_reduce, alltoall, sendrecv, ...
    redop: str  # what its rows print in the redop column
    root: int  # what its rows print in the root column (-1: no root)
    # (elements in the size, ranks) -> (send, receive, printed) element counts per rank
    counts: Callable[[int, int], tuple[int, int, int]]
    bus_factor: Callable[[int], float]  # ranks -> busbw / algbw
    # torch has no in-place form (all_to_all_single, isend/irecv into the buffer they send):
    # the in-place run aliases the buffers as nccl-tests does and, as nccl-tests 2.17, is not validated.
    in_place_validated: bool = True

    @property
    def program(self) -> str:
        """The nccl-tests program name, e.g. all_reduce_perf (also the file's stem)."""
        return f"{self.name}_perf"

    def sized(self, size_bytes: int, ranks: int) -> tuple[int, int, int]:
        """(send, receive, printed) element counts per rank for a requested size in bytes."""
        return self.counts(size_bytes // DTYPE_BYTES, ranks)


OPS: dict[str, CollectiveOp] = {
    op.name: op
    for op in (
        CollectiveOp("all_reduce", "sum", -1, _whole, lambda n: 2 * (n - 1) / n),
        CollectiveOp("all_gather", "none", -1, _gather, lambda n: (n - 1) / n),
        CollectiveOp("reduce_scatter", "sum", -1, _scatter, lambda n: (n - 1) / n),
        CollectiveOp("alltoall", "none", -1, _alltoall, lambda n: (n - 1) / n, in_place_validated=False),
        CollectiveOp("broadcast", "none", 0, _whole, lambda n: 1.0),
        # nccl-tests' sendrecv prints the reduction it was given (sum) though nothing is reduced.
        CollectiveOp("sendrecv", "sum", -1, _whole, lambda n: 1.0, in_place_validated=False),
    )
}


def known_skip(op: str, backend: str, world_size: int) -> str | None:
    """Why the backend cannot run the op at this world size, when that is known beforehand."""
    if op == "sendrecv" and backend == "gloo" and world_size == 1:
        return "gloo connects a rank to no one at world size 1 (a rank cannot send to itself)"
    return None


def perf_file_name(op: str) -> str:
    """The file one op's table is written to, e.g. all_reduce_perf.txt."""
    return f"{OPS[op].program}.txt"


@dataclass(frozen=True, kw_only=True)
class CalibrationSpec:
    """One collective sweep: every rank runs every op at every size, warmup then timed iterations."""

    world_size: int  # ranks, one process each (torchrun --nproc_per_node)
    backend: str  # gloo | nccl, already resolved (see launch.resolve_backend)
    min_bytes: int  # smallest size, bytes (nccl-tests -b); every rank holds at least one float
    max_bytes: int  # largest size, bytes (nccl-tests -e); sizes double from min_bytes (-f 2)
    iters: int = DEFAULT_ITERS  # timed iterations per size and placement (-n)
    warmup: int = DEFAULT_WARMUP  # untimed iterations before them (-w)
    ops: tuple[str, ...] = tuple(OPS)  # in the order they run
    timeout_s: float = DEFAULT_TIMEOUT_S  # the whole torchrun
    nodes: int = 1  # hosts the ranks are spread over, world_size / nodes each (see calibrate.cluster)

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ValueError(f"world size must be >= 1, got {self.world_size}")
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; known: {', '.join(BACKENDS)}")
        if self.min_bytes < DTYPE_BYTES * self.world_size:
            raise ValueError(
                f"min bytes {self.min_bytes} is less than one float per rank "
                f"({DTYPE_BYTES * self.world_size} at world size {self.world_size})"
            )
        if self.max_bytes < self.min_bytes:
            raise ValueError(f"max bytes {self.max_bytes} is less than min bytes {self.min_bytes}")
        if self.iters < 1 or self.warmup < 0:
            raise ValueError(f"iters must be >= 1 and warmup >= 0, got {self.iters} and {self.warmup}")
        unknown = [op for op in self.ops if op not in OPS]
        if unknown or not self.ops or len(set(self.ops)) != len(self.ops):
            raise ValueError(
                f"ops must be distinct names among {', '.join(OPS)}; got {', '.join(self.ops) or 'none'}"
            )
        if self.timeout_s <= 0:
            raise ValueError(f"timeout must be > 0 s, got {self.timeout_s:g}")
        if self.nodes < 1 or self.world_size % self.nodes:
            raise ValueError(f"world size {self.world_size} does not divide into {self.nodes} node(s)")

    @property
    def per_node(self) -> int:
        """Ranks on each node."""
        return self.world_size // self.nodes

    def sizes(self) -> list[int]:
        """The requested sizes in bytes: min_bytes doubling up to max_bytes."""
        sizes, size = [], self.min_bytes
        while size <= self.max_bytes:
            sizes.append(size)
            size *= 2
        return sizes

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {**dataclasses.asdict(self), "ops": list(self.ops)}

    def write(self, path: Path) -> None:
        """Write the spec as JSON."""
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def read(cls, path: Path) -> CalibrationSpec:
        """Read a spec written by `write`."""
        data = json.loads(path.read_text())
        return cls(**{**data, "ops": tuple(data["ops"])})


def default_spec(
    *,
    world_size: int,
    backend: str,
    min_bytes: int | None = None,
    max_bytes: int | None = None,
    **rest: Any,
) -> CalibrationSpec:
    """A spec with the backend's default sizes where none are given (ValueError when invalid)."""
    low, high = DEFAULT_SIZES.get(backend, (1024, 1024))
    low = max(low, DTYPE_BYTES * world_size) if min_bytes is None else min_bytes
    high = max(high, low) if max_bytes is None else max_bytes
    return CalibrationSpec(world_size=world_size, backend=backend, min_bytes=low, max_bytes=high, **rest)
