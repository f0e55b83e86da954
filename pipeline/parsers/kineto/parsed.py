"""What parsing one rank trace produces: columnar frames plus the trace's metadata."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl


@dataclass(frozen=True, kw_only=True)
class TraceMeta:
    """Facts read from a trace's top level (`distributedInfo`, `deviceProperties`, ...)."""

    rank: int | None  # from distributedInfo; None when the trace does not say
    world_size: int | None
    backend: str | None  # nccl, gloo, ...
    host: str | None
    device_names: tuple[str, ...]  # deviceProperties / computeProperties names
    base_time_ns: int | None  # baseTimeNanoseconds, when present
    ts_origin: str  # "relative-base" or "absolute-epoch"
    layout: str  # "object" (has traceEvents) or "bare-array"
    schema_version: int | None
    negative_dur_events: int  # dropped events with dur < 0
    decoder: str  # which decoder read the events: "scanner" (the C extension) or "msgspec"
    utf8_replaced: bool  # invalid UTF-8 in the JSON text was replaced by U+FFFD
    distributed_info_json: str | None = None


@dataclass(frozen=True, kw_only=True)
class ParsedTrace:
    """One rank trace as tables whose columns are declared in `tracehouse.pipeline.warehouse.schema`."""

    meta: TraceMeta
    events: pl.DataFrame
    steps: pl.DataFrame
    collectives: pl.DataFrame
    threads: pl.DataFrame
    process_groups: pl.DataFrame
    ops: pl.DataFrame
    op_launches: pl.DataFrame
    op_calls: pl.DataFrame  # each cpu_op call with what the op views sum (pipeline/ops/calls.py)
    memory_events: pl.DataFrame
    extra: dict[str, str] = field(default_factory=dict)
