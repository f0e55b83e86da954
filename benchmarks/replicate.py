"""Rank traces for benchmarks: copies of one real trace as ranks 0..N-1 of a run.

Each copy is the source with `distributedInfo` patched (rank, world_size, every process
group spanning the N ranks) and its clock shifted: `baseTimeNanoseconds` + rank x skew (a
trace without that key has epoch µs timestamps, so the key is added as the shift). The events
are encoded once and shared by every copy. Files go wherever the caller says (never into the
repository).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import msgspec

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_SOURCE = SHARED / "traces" / "tracelens" / "mi300_ddp_rank0_of8.json.gz"
SKEW_NS = 37_000  # between consecutive ranks' clocks


def load(path: Path) -> dict[str, Any]:
    """A trace as plain Python objects."""
    data = path.read_bytes()
    return msgspec.json.decode(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


class Replicator:
    """Writes copies of one source trace as the ranks of a run."""

    def __init__(self, source: Path) -> None:
        trace = load(source)
        if isinstance(trace, list):
            trace = {"traceEvents": trace}
        self.source = source
        self.events = msgspec.json.encode(trace.pop("traceEvents"))
        self.head = trace
        self.n_events = self.events.count(b'"ph":"X"')

    def write(
        self, path: Path, *, rank: int, world_size: int, compress: bool = True, offset_ns: int = 0
    ) -> Path:
        """One copy as `rank` of `world_size` ranks, clock offset_ns later; gzip (level 1) if compress."""
        head = dict(self.head)
        info = dict(head.get("distributedInfo") or {"backend": "nccl"})
        groups = [dict(g) for g in info.get("pg_config") or []]
        for group in groups:
            group.update(pg_size=world_size, ranks=list(range(world_size)))
        info.update(rank=rank, world_size=world_size, **({"pg_config": groups} if groups else {}))
        head["baseTimeNanoseconds"] = int(head.get("baseTimeNanoseconds") or 0) + offset_ns + rank * SKEW_NS
        # first and as json.dumps spaces it: HTA finds a file's rank with the regex '"rank":\s+(\d+)'
        head = {"distributedInfo": info, **{k: v for k, v in head.items() if k != "distributedInfo"}}
        data = json.dumps(head).encode()[:-1] + b', "traceEvents": ' + self.events + b"}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(data, compresslevel=1, mtime=0) if compress else data)
        return path

    def run(
        self,
        folder: Path,
        *,
        ranks: int,
        compress: bool = True,
        manifest: dict[str, Any] | None = None,
        offset_ns: int = 0,
    ) -> list[Path]:
        """Ranks 0..ranks-1 in folder (rank<N>.pt.trace.json[.gz]), with manifest.json when given.

        offset_ns moves the whole run's clock: two runs of the same size then differ (a warehouse
        keeps one copy of a file's content).
        """
        suffix = ".pt.trace.json.gz" if compress else ".pt.trace.json"
        paths = [
            self.write(
                folder / f"rank{r}{suffix}", rank=r, world_size=ranks, compress=compress, offset_ns=offset_ns
            )
            for r in range(ranks)
        ]
        if manifest is not None:
            traces = {str(r): p.name for r, p in enumerate(paths)}
            (folder / "manifest.json").write_text(json.dumps({**manifest, "traces": traces}, indent=1))
        return paths
