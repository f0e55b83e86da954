"""Parse one Kineto (PyTorch profiler) rank trace into the raw tables of `pipeline.schema`.

`parse_trace(path)` is pure and module-level: it reads one `.json` / `.json.gz` file and
returns a `ParsedTrace` (EVENTS, STEPS, COLLECTIVES, THREADS, PROCESS_GROUPS, OPS, OP_LAUNCHES,
OP_CALLS, MEMORY_EVENTS + TraceMeta).
It is the unit of parallel work in ingest. Any unreadable input raises `TraceFormatError`
with a one-line reason naming the file (a FIFO or directory: "not a regular file").

Two paths read the events array into the same `EventRows`: the C scanner
(`fastscan`, one pass, no per-event Python objects) and, when the extension is
missing or declines the input, msgspec Structs decoded in batches (`chunks`; peak
RSS ≈ 2× the uncompressed file on a 1 GB trace). Both give identical frames;
`meta.decoder` says which read the file ("scanner" or "msgspec"; `extra["decoder"]` the finer
"scan", "typed" or "loose") and `meta.utf8_replaced` whether invalid UTF-8 was replaced.
TRACEHOUSE_SCANNER=0 in the environment turns the scanner off.

Decisions (details in the modules of this package):
* Layouts: an object with `traceEvents`, or a bare array of events. Categories match
  `KIND_BY_CATEGORY` case-insensitively; anything else is kind "other".
* Time: `ts_unix_ns = baseTimeNanoseconds + ns(ts)` when the trace has that key, else
  `ns(ts)` (epoch µs), exact to the ns (`timestamps`). `dur_ns = ns(dur)`.
* Only complete events (`ph == "X"`) become EVENTS; events with dur < 0 are dropped and
  counted in `meta.negative_dur_events`; `M` events feed THREADS; flows/instants are skipped.
  A complete event without ts or dur, or with one that is not a JSON number, is an error; so is
  a trace with no complete events ("no trace events").
* `external_id` is `args["External id"]`, or the 2020-2021 spelling `args["external id"]`.
* Invalid UTF-8 in the JSON text is replaced by U+FFFD (`meta.utf8_replaced`),
  not an error: one mangled kernel name should not lose a rank.
* Integers that overflow 64 bits in args (NCCL comm ids) are ignored (NULL where a column);
  a `device` arg outside int32 (the EVENTS column type) is NULL too.
* Limits (`kineto.limits`, decided once, held by both decoders alike): JSON nested at most 512
  levels; |ts| and |dur| of complete events below 2^53 µs; `ts_unix_ns` and `ts_unix_ns + dur_ns`
  within int64 after adding `baseTimeNanoseconds` (itself int64); rank, world_size,
  schemaVersion, pg_size and pg_config ranks within int32; numbers msgspec cannot decode (beyond
  double range, integer literals over 4,300 characters) wherever it decodes them. Beyond a limit
  the file is a TraceFormatError naming the field and the value; an event arg beyond its column
  (device, Group size outside int32, sizes outside int64) is NULL instead.
* The contract, checked by `tests/fuzz` on mutated real traces: any input gives frames or one
  TraceFormatError, the same with and without the scanner, in time linear in its size; anything
  else escaping is a bug and propagates as itself.
* Name- and category-derived facts (kind, comm candidates, ProfilerStep numbers) are evaluated
  once per unique string on the scanner path (`fastscan`), per row on the msgspec path.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.ops.calls import op_calls_frame
from tracehouse.pipeline.ops.version import formulas_version
from tracehouse.pipeline.parsers.kineto import decode as dec
from tracehouse.pipeline.parsers.kineto.chunks import chunk_rows
from tracehouse.pipeline.parsers.kineto.collectives import collectives_frame
from tracehouse.pipeline.parsers.kineto.events import (
    NO_EVENTS,
    EventRows,
    check_times,
    events_frame,
    threads_frame,
)
from tracehouse.pipeline.parsers.kineto.fastscan import scan_trace
from tracehouse.pipeline.parsers.kineto.memory import memory_frame
from tracehouse.pipeline.parsers.kineto.meta import TopLevel, process_groups_frame, top_level, trace_meta
from tracehouse.pipeline.parsers.kineto.ops import host_tree, launches_frame, ops_frame
from tracehouse.pipeline.parsers.kineto.parsed import ParsedTrace
from tracehouse.pipeline.parsers.kineto.steps import steps_frame
from tracehouse.pipeline.warehouse.schema import EVENTS, MEMORY_EVENTS, empty_frame

# Set to 0 in the environment to turn the C scanner off (the msgspec path reads every file).
SCANNER_VARIABLE = "TRACEHOUSE_SCANNER"


def parse_trace(path: str | Path, *, scanner: bool | None = None) -> ParsedTrace:
    """Parse one Kineto rank trace file into columnar frames plus its metadata.

    `scanner=False` skips the C scanner (the msgspec path alone; tests compare the two); the
    default is on unless the environment sets TRACEHOUSE_SCANNER=0.
    """
    path = Path(path)
    if scanner is None:
        scanner = scanner_enabled()
    data = dec.read_bytes(path)
    scanned = scan_trace(data) if scanner else None
    if scanned is not None:
        top = top_level(path, scanned.fields, bare_array=scanned.bare_array, invalid_utf8=False)
        rows = scanned.rows
    else:
        fields, events, top_replaced = dec.decode_top(path, data)
        bare = fields.traceEvents is None and events is data
        top = top_level(path, fields, bare_array=bare, invalid_utf8=top_replaced)
        del fields
        rows = chunk_rows(path, events, invalid_utf8=top_replaced)
        del events
    parsed = _parsed(path, top, rows)
    memory = memory_frame(data, top.base_time_ns or 0) if rows.memory else empty_frame(MEMORY_EVENTS)
    del data
    return replace(parsed, memory_events=memory)


def scanner_enabled() -> bool:
    """False when the environment turns the C scanner off (TRACEHOUSE_SCANNER=0)."""
    return os.environ.get(SCANNER_VARIABLE, "1").strip() != "0"


def _parsed(path: Path, top: TopLevel, rows: EventRows) -> ParsedTrace:
    """The frames of one trace from its event rows."""
    raw = rows.raw
    if raw.height == 0:
        raise TraceFormatError(path, NO_EVENTS)
    check_times(path, raw, top.base_time_ns or 0)
    full, negative = events_frame(raw, top.base_time_ns or 0)
    extra = {"decoder": rows.decoder}
    host = host_tree(full)
    ops = ops_frame(full, host)
    steps = steps_frame(full)
    launches = launches_frame(full, host)
    return ParsedTrace(
        meta=trace_meta(
            top,
            negative,
            decoder="scanner" if rows.decoder == "scan" else "msgspec",
            utf8_replaced=rows.invalid_utf8,
        ),
        events=full.select(EVENTS.keys()),
        steps=steps,
        collectives=collectives_frame(full, rows.comm_args, top),
        threads=threads_frame(rows.metas),
        process_groups=process_groups_frame(top),
        ops=ops,
        op_launches=launches,
        op_calls=op_calls_frame(ops, launches, steps, version=formulas_version()),
        memory_events=empty_frame(MEMORY_EVENTS),
        extra=extra,
    )
