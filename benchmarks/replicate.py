"""Rank traces for benchmarks: copies of one real trace as ranks 0..N-1 of a run.

Each copy is the source with `distributedInfo` patched (rank, world_size, every process
group spanning the N ranks) and its clock shifted: `baseTimeNanoseconds` + rank x skew (a
trace without that key has epoch µs timestamps, so the key is added as the shift). The events
are encoded once and shared by every copy. Files go wherever the caller says (never into the
repository).

`copies=K` makes each rank trace hold K consecutive copies of the source's timeline (`repeated`):
copy c is every event but the metadata (ph M, kept once) moved c x (the source's span + GAP_US)
later, `ProfilerStep#N` renumbered to N + c x (the source's range of step numbers), and every id
that links events (ID_ARGS, flow event ids) raised by c x `id_stride` (the power of ten above
every id), so launches still find their kernels (`correlation`), ops their runtime calls
(`External id`), and steps stay unique and increasing. Times are shifted as decimals (JSON floats
decoded as `Decimal`), so every copy's ns are exact. Every step of every copy then has the
source's step_breakdown row except the last step of each copy but the last: a GPU step window
ends where the next step's begins (sql/views/staging/gpu_step_windows.sql), so that window runs
on over the gap and the next copy's work launched before its first step.
"""

from __future__ import annotations

import gzip
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
from tracehouse.pipeline.parsers.kineto.names import step_number

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_SOURCE = SHARED / "traces" / "tracelens" / "mi300_ddp_rank0_of8.json.gz"
SKEW_NS = 37_000  # between consecutive ranks' clocks
GAP_US = 1_000  # between the end of one copy of the timeline and the start of the next
# args holding ids that link events or must stay unique: raised per copy (flow events' `id` too).
# Not ids of things that repeat: `cid` (the runtime API), `Python module id`, `Fwd thread id`.
ID_ARGS = (
    "correlation", "External id", "external id", "Python id", "Python parent id", "Ev Idx",
    "Record function id", "Sequence number", "Seq",
)  # fmt: skip
FLOW_PHASES = ("s", "t", "f")


def load(path: Path, *, exact: bool = False) -> Any:
    """A trace as plain Python objects; exact: JSON floats as `Decimal` (their text, unrounded)."""
    data = path.read_bytes()
    decoder = msgspec.json.Decoder(float_hook=Decimal if exact else None)
    return decoder.decode(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def _number(value: Any) -> bool:
    return type(value) in (int, Decimal)


def repeated(events: list[dict[str, Any]], copies: int) -> list[dict[str, Any]]:
    """The events followed by copies-1 more copies of their timeline (see the module docstring)."""
    timed = [e for e in events if e.get("ph") != "M" and _number(e.get("ts"))]
    if copies == 1 or not timed:
        return events
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + (e["dur"] if _number(e.get("dur")) and e["dur"] > 0 else 0) for e in timed)
    shift_us = math.ceil(end - start) + GAP_US
    steps = [n for e in events if (n := step_number(e.get("name"))) is not None]
    step_stride = max(steps) - min(steps) + 1 if steps else 0
    stride = id_stride(events)
    out = list(events)
    for c in range(1, copies):
        out.extend(_moved(e, c * shift_us, c * step_stride, c * stride) for e in events if e.get("ph") != "M")
    return out


def id_stride(events: list[dict[str, Any]]) -> int:
    """The power of ten above every id in the events (ID_ARGS, flow ids): one copy's id offset."""
    ids = [e["id"] for e in events if e.get("ph") in FLOW_PHASES and type(e.get("id")) is int]
    for e in events:
        args = e.get("args")
        if isinstance(args, dict):
            ids.extend(args[k] for k in ID_ARGS if type(args.get(k)) is int)
    return 10 ** len(str(max((abs(i) for i in ids), default=0)))


def _moved(event: dict[str, Any], shift_us: int, step_offset: int, id_offset: int) -> dict[str, Any]:
    """One event of a later copy: time shifted, step renumbered, ids raised."""
    event = dict(event)
    if _number(event.get("ts")):
        event["ts"] += shift_us
    if (step := step_number(event.get("name"))) is not None:
        event["name"] = f"ProfilerStep#{step + step_offset}"
    if event.get("ph") in FLOW_PHASES and type(event.get("id")) is int:
        event["id"] += id_offset
    args = event.get("args")
    if isinstance(args, dict) and any(type(args.get(k)) is int for k in ID_ARGS):
        event["args"] = {k: v + id_offset if k in ID_ARGS and type(v) is int else v for k, v in args.items()}
    return event


class Replicator:
    """Writes copies of one source trace as the ranks of a run, each holding `copies` timelines."""

    def __init__(self, source: Path, *, copies: int = 1) -> None:
        if copies < 1:
            raise ValueError(f"copies {copies}: give at least 1")
        trace = load(source)
        if isinstance(trace, list):
            trace = {"traceEvents": trace}
        self.source, self.copies = source, copies
        events = trace.pop("traceEvents")
        if copies > 1:
            exact = load(source, exact=True)
            events = repeated(exact if isinstance(exact, list) else exact["traceEvents"], copies)
        self.events = msgspec.json.Encoder(decimal_format="number").encode(events)
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
