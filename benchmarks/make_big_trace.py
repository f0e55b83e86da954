"""Build a >= 1 GB (uncompressed) Kineto trace by repeating the steps of a real trace.

Each copy of the source's events is shifted in time by the source's span, and its
correlation / External id / ProfilerStep numbers are offset, so the result reads like one
long profiling window. Writes to /tmp by default (never into the repository).

    .venv/bin/python benchmarks/make_big_trace.py [--source TRACE] [--size-gb 1.0] [--out PATH]
"""

from __future__ import annotations

import argparse
import gzip
import re
from pathlib import Path
from typing import Any

import msgspec

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"
DEFAULT_SOURCE = SHARED / "hta" / "nccl_parser_config_rank0.json.gz"
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def load(path: Path) -> dict[str, Any]:
    """The source trace as plain Python objects."""
    data = path.read_bytes()
    return msgspec.json.decode(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def shifted(events: list[dict], copy: int, span_us: float, id_offset: int, step_offset: int) -> list[dict]:
    """One copy of the complete/flow events, moved `copy` spans later with fresh ids."""
    out = []
    for event in events:
        e = dict(event)
        if "ts" in e:
            e["ts"] = round(e["ts"] + copy * span_us, 3)
        args = e.get("args")
        if isinstance(args, dict):
            args = dict(args)
            for key in ("correlation", "External id"):
                if type(args.get(key)) is int:
                    args[key] += copy * id_offset
            e["args"] = args
        if "id" in e and type(e["id"]) is int:
            e["id"] += copy * id_offset
        match = STEP.match(e.get("name", ""))
        if match:
            e["name"] = f"ProfilerStep#{int(match.group(1)) + copy * step_offset}"
        out.append(e)
    return out


def build(source: Path, out: Path, size_bytes: int) -> tuple[int, int]:
    """Write the big trace; returns (events, bytes)."""
    trace = load(source)
    events = trace.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M" and "ts" in e]
    start = min(e["ts"] for e in timed)
    span_us = max(e["ts"] + e.get("dur", 0) for e in timed) - start + 1000.0
    id_offset = 1 + max(
        (
            v
            for e in timed
            for k, v in (e.get("args") or {}).items()
            if k in ("correlation", "External id") and type(v) is int
        ),
        default=0,
    )
    step_offset = 1 + max((int(m.group(1)) for e in timed if (m := STEP.match(e.get("name", "")))), default=0)
    encoder = msgspec.json.Encoder()
    head = encoder.encode(trace)[:-1] + b', "traceEvents": ['
    written, count, copy = 0, 0, 0
    with out.open("wb") as f:
        f.write(head)
        f.write(b",\n".join(encoder.encode(e) for e in meta))
        written, count = len(head), len(meta)
        while written < size_bytes:
            chunk = b",\n" + b",\n".join(
                encoder.encode(e) for e in shifted(timed, copy, span_us, id_offset, step_offset)
            )
            f.write(chunk)
            written += len(chunk)
            count += len(timed)
            copy += 1
        f.write(b"]}\n")
    return count, written + 3


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/tracehouse_big_trace.json"))
    args = parser.parse_args()
    events, size = build(args.source, args.out, int(args.size_gb * 1e9))
    print(f"wrote {args.out}: {events} events, {size / 1e6:.0f} MB from {args.source.name}")


if __name__ == "__main__":
    main()
