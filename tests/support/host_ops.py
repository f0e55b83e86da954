"""Host ops (cpu_op events) of a Chrome-trace JSON as a frame, with each call's enclosing call.

Test-only: until the warehouse holds the ops table, the FLOPs oracle reads the exported trace
directly. A call's parent is the innermost call on the same thread whose span contains it.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl


def _text(value: object) -> str | None:
    """A cpu_op arg as the JSON text the trace holds (None where absent)."""
    return None if value is None else json.dumps(value)


def host_ops(path: Path) -> pl.DataFrame:
    """(id, parent_id, name, input_dims, input_types, concrete_inputs) of every cpu_op event."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op"]
    events.sort(key=lambda e: (str(e["tid"]), float(e["ts"]), -float(e.get("dur", 0))))
    rows, stack, thread = [], [], None
    for i, e in enumerate(events):
        start, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
        if e["tid"] != thread:
            stack, thread = [], e["tid"]
        while stack and stack[-1][1] < end:
            stack.pop()
        args = e.get("args", {})
        rows.append(
            {
                "id": i,
                "parent_id": stack[-1][0] if stack else None,
                "name": e["name"],
                "input_dims": _text(args.get("Input Dims")),
                "input_types": _text(args.get("Input type")),
                "concrete_inputs": _text(args.get("Concrete Inputs")),
            }
        )
        stack.append((i, end, start))
    return pl.DataFrame(rows, schema_overrides={"parent_id": pl.Int64, "id": pl.Int64})
