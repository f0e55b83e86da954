"""A trace's top-level facts: TraceMeta and the PROCESS_GROUPS frame (distributedInfo.pg_config)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from tracehouse.pipeline.common.errors import TraceFormatError
from tracehouse.pipeline.parsers.kineto.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, in_range
from tracehouse.pipeline.parsers.kineto.parsed import TraceMeta
from tracehouse.pipeline.warehouse.schema import PROCESS_GROUPS


@dataclass(frozen=True, kw_only=True)
class TopLevel:
    """What the parser keeps from the top-level object (everything but traceEvents)."""

    path: Path
    base_time_ns: int | None
    distributed_info: dict[str, Any] | None
    device_names: tuple[str, ...]
    host: str | None
    schema_version: int | None
    bare_array: bool
    invalid_utf8: bool

    @property
    def pg_config(self) -> list[dict[str, Any]]:
        """distributedInfo.pg_config entries (dicts only); empty when absent."""
        config = (self.distributed_info or {}).get("pg_config")
        return [g for g in config if isinstance(g, dict)] if isinstance(config, list) else []

    @property
    def single_group(self) -> dict[str, Any]:
        """process_group / pg_desc / group_size of the only pg_config group (all None unless exactly one)."""
        if len(self.pg_config) != 1:
            return {"process_group": None, "pg_desc": None, "group_size": None}
        g = self.pg_config[0]
        return {
            "process_group": None if g.get("pg_name") is None else str(g.get("pg_name")),
            "pg_desc": g.get("pg_desc") if isinstance(g.get("pg_desc"), str) else None,
            "group_size": g.get("pg_size") if type(g.get("pg_size")) is int else None,
        }

    def info_int(self, key: str) -> int | None:
        """An integer field of distributedInfo, or None."""
        value = (self.distributed_info or {}).get(key)
        return value if type(value) is int else None


def _int32(path: Path, field: str, value: Any) -> None:
    """TraceFormatError when an integer the warehouse stores as INTEGER does not fit int32."""
    if type(value) is int:
        in_range(path, field, value, INT32_MIN, INT32_MAX)


def _check_ranges(path: Path, trace: Any, info: dict[str, Any] | None) -> None:
    """The top-level integers that become warehouse columns must fit them (`kineto.limits`)."""
    in_range(path, "baseTimeNanoseconds", trace.baseTimeNanoseconds, INT64_MIN, INT64_MAX)
    _int32(path, "schemaVersion", trace.schemaVersion)
    info = info or {}
    for key in ("rank", "world_size"):
        _int32(path, f"distributedInfo.{key}", info.get(key))
    config = info.get("pg_config")
    for i, group in enumerate(config if isinstance(config, list) else []):
        if not isinstance(group, dict):
            continue
        _int32(path, f"distributedInfo.pg_config[{i}].pg_size", group.get("pg_size"))
        ranks = group.get("ranks")
        for j, rank in enumerate(ranks if isinstance(ranks, list) else []):
            _int32(path, f"distributedInfo.pg_config[{i}].ranks[{j}]", rank)


def top_level(path: Path, trace: Any, *, bare_array: bool, invalid_utf8: bool) -> TopLevel:
    """Collect the top-level facts from a decoded trace."""
    info = trace.distributedInfo
    if info is not None and not isinstance(info, dict):
        raise TraceFormatError(path, "distributedInfo is not an object")
    _check_ranges(path, trace, info)
    devices = trace.deviceProperties or trace.computeProperties or []
    host = trace.host_name if trace.host_name is not None else trace.hostname
    version = trace.schemaVersion
    return TopLevel(
        path=path,
        base_time_ns=trace.baseTimeNanoseconds,
        distributed_info=info,
        device_names=tuple(str(d.name) for d in devices if d.name is not None),
        host=host if isinstance(host, str) else None,
        schema_version=version if type(version) is int else None,
        bare_array=bare_array,
        invalid_utf8=invalid_utf8,
    )


def trace_meta(top: TopLevel, negative_dur_events: int, *, decoder: str, utf8_replaced: bool) -> TraceMeta:
    """TraceMeta from the top-level facts and what read the events (`decoder`, `utf8_replaced`)."""
    info = top.distributed_info or {}
    backend = info.get("backend")
    return TraceMeta(
        rank=top.info_int("rank"),
        world_size=top.info_int("world_size"),
        backend=backend if isinstance(backend, str) else None,
        host=top.host,
        device_names=top.device_names,
        base_time_ns=top.base_time_ns,
        ts_origin="relative-base" if top.base_time_ns is not None else "absolute-epoch",
        layout="bare-array" if top.bare_array else "object",
        schema_version=top.schema_version,
        negative_dur_events=negative_dur_events,
        decoder=decoder,
        utf8_replaced=utf8_replaced,
        distributed_info_json=json.dumps(top.distributed_info) if top.distributed_info else None,
    )


def _ranks(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(type(r) is int for r in value):
        return value
    return None


def process_groups_frame(top: TopLevel) -> pl.DataFrame:
    """One row per distributedInfo.pg_config entry."""
    rows = [
        {
            "process_group": None if g.get("pg_name") is None else str(g.get("pg_name")),
            "pg_desc": g.get("pg_desc") if isinstance(g.get("pg_desc"), str) else None,
            "backend_config": g.get("backend_config") if isinstance(g.get("backend_config"), str) else None,
            "group_size": g.get("pg_size") if type(g.get("pg_size")) is int else None,
            "ranks": _ranks(g.get("ranks")),
        }
        for g in top.pg_config
    ]
    return pl.DataFrame(rows, schema=PROCESS_GROUPS) if rows else pl.DataFrame(schema=PROCESS_GROUPS)
