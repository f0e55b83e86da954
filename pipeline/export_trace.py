"""One Perfetto/Chrome trace JSON of a run's chosen steps: every rank, clocks aligned, overlay tracks.

Each rank is a process (pid = rank) with a thread per host thread and per GPU stream; its
events are those overlapping the step on that rank (its ProfilerStep span or its device
window), shifted by its host's `clock_offsets` row so that ranks share the reference host's
clock. Overlay threads draw the `comm_exposure` rows with exposed time and the `idle_causes`
rows of those steps, and a critical-path thread the segments of the `critical_path` view
(stored by `tracehouse project`), each on the rank it runs on, placed at its offset from the
start of the path rank's measured window (the replay reproduces the measured steps within
0.02 %). Times are µs from the earliest exported instant (`otherData.base_unix_ns`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.pipeline.compare import RunRef, resolve_run

EXPOSED_LANE = "exposed communication"
IDLE_LANE = "idle cause"
CRITICAL_LANE = "critical path"

# Per rank and chosen step: the span exported, the union of its host step and device window.
_RANGES = """
WITH spans AS (
    SELECT rank, step, start_ns, end_ns FROM device_windows
    WHERE study = $study AND run_id = $run AND scope = 'step' AND list_contains($steps, step)
    UNION ALL
    SELECT rank, step, ts_unix_ns, ts_unix_ns + dur_ns FROM steps
    WHERE study = $study AND run_id = $run AND dur_ns >= 0 AND list_contains($steps, step)
)
SELECT rank, step, min(start_ns) AS a, max(end_ns) AS b FROM spans GROUP BY rank, step
"""

# The shift of each rank: minus its host's offset from the reference host (0 when none is known).
_SHIFTS = """
SELECT t.rank, t.host, CAST(round(coalesce(o.offset_us, 0) * 1000) AS BIGINT) AS offset_ns,
    o.offset_us IS NOT NULL AS known
FROM traces AS t
LEFT JOIN clock_offsets AS o ON o.study = t.study AND o.run_id = t.run_id AND o.host = t.host
WHERE t.study = $study AND t.run_id = $run
"""

# Events overlapping a chosen range; an event in several ranges counts once (n copies kept).
_EVENTS = f"""
WITH ranges AS ({_RANGES}),
matched AS (
    SELECT e.rank, e.kind, e.cat, e.name, e.ts_unix_ns, e.dur_ns, e.pid, e.tid, e.stream,
        e.correlation, r.step
    FROM events AS e
    JOIN ranges AS r ON e.rank = r.rank AND e.ts_unix_ns < r.b AND e.ts_unix_ns + e.dur_ns >= r.a
    WHERE e.study = $study AND e.run_id = $run AND e.dur_ns >= 0
)
SELECT rank, kind, cat, name, ts_unix_ns, dur_ns, pid, tid, stream, correlation, min(step) AS step,
    count(*) // count(DISTINCT step) AS copies
FROM matched
GROUP BY ALL
ORDER BY rank, ts_unix_ns
"""

_EXPOSED = """
SELECT rank, step, coalesce(op, name) AS label, name, start_unix_ns, dur_us, exposed_us,
    exposed_wait_us, exposed_transfer_us, parallel_dim, phase
FROM comm_exposure
WHERE study = $study AND run_id = $run AND list_contains($steps, step) AND exposed_us > 0
ORDER BY rank, start_unix_ns
"""

_IDLE = """
SELECT rank, step, window_start_unix_ns, window_us, idle_us, idle_host_wait_us, idle_device_wait_us,
    idle_unknown_us
FROM idle_causes
WHERE study = $study AND run_id = $run AND list_contains($steps, step)
ORDER BY rank, step
"""

# The stored critical paths of the chosen steps, each segment with its path rank's window start;
# a run without a current path has one row with its reason.
_CRITICAL = """
SELECT c.step, c.path_rank, c.seq, c.rank, c.kind, c.op, c.start_us, c.dur_us, c.reason,
    w.window_start_unix_ns
FROM critical_path AS c
LEFT JOIN idle_causes AS w
    ON w.study = c.study AND w.run_id = c.run_id AND w.step = c.step AND w.rank = c.path_rank
WHERE c.study = $study AND c.run_id = $run AND (c.reason IS NOT NULL OR list_contains($steps, c.step))
ORDER BY c.step, c.seq
"""


@dataclass(frozen=True, kw_only=True)
class TraceExport:
    """What `export_trace` wrote."""

    path: Path
    run: RunRef
    steps: list[int]
    ranks: list[int]
    events: int
    exposed_comm: int
    idle_windows: int
    critical_segments: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "path": str(self.path),
            "study": self.run.study,
            "run_id": self.run.run_id,
            "steps": self.steps,
            "ranks": self.ranks,
            "events": self.events,
            "exposed_comm": self.exposed_comm,
            "idle_windows": self.idle_windows,
            "critical_segments": self.critical_segments,
            "notes": self.notes,
        }


def export_trace(
    connection: duckdb.DuckDBPyConnection,
    run: str,
    steps: Sequence[int],
    out: Path,
    *,
    study: str | None = None,
) -> TraceExport:
    """Write the chosen steps of a run, all ranks, as one Chrome trace JSON file at `out`."""
    ref = resolve_run(connection, run, study)
    wanted = sorted(set(steps))
    params = {"study": ref.study, "run": ref.run_id, "steps": wanted}
    _check_steps(connection, ref, wanted)
    shifts = {r["rank"]: r for r in _rows(connection, _SHIFTS, {"study": ref.study, "run": ref.run_id})}
    events = _rows(connection, _EVENTS, params)
    exposed = _rows(connection, _EXPOSED, params)
    idle = _rows(connection, _IDLE, params)
    critical = _rows(connection, _CRITICAL, params)
    notes = _notes(shifts, critical)
    builder = _Builder(shifts)
    for e in events:
        builder.device_or_host(e)
    for x in exposed:
        builder.exposed(x)
    for w in idle:
        builder.idle(w)
    placed = [c for c in critical if c["reason"] is None and c["window_start_unix_ns"] is not None]
    for c in placed:
        builder.critical(c)
    _write(out, builder.document(ref, wanted, notes))
    return TraceExport(
        path=out,
        run=ref,
        steps=wanted,
        ranks=sorted({e["rank"] for e in events}),
        events=sum(e["copies"] for e in events),
        exposed_comm=len(exposed),
        idle_windows=len(idle),
        critical_segments=len(placed),
        notes=notes,
    )


def _check_steps(connection: duckdb.DuckDBPyConnection, ref: RunRef, wanted: list[int]) -> None:
    """One line naming the steps the run lacks, and those it has."""
    known = sorted(
        r[0]
        for r in connection.execute(
            "SELECT DISTINCT step FROM step_breakdown WHERE study = ? AND run_id = ?", [ref.study, ref.run_id]
        ).fetchall()
    )
    missing = [s for s in wanted if s not in known]
    if not wanted or missing:
        what = "no step chosen" if not wanted else f"no step {', '.join(map(str, missing))}"
        raise WarehouseError(f"run {ref}: {what}; its steps: {', '.join(map(str, known))}")


def _notes(shifts: dict[int, dict], critical: list[dict]) -> list[str]:
    """What the file leaves out or could not align."""
    notes = []
    unaligned = sorted(r for r, s in shifts.items() if not s["known"])
    if unaligned and len(unaligned) < len(shifts):
        notes.append(f"ranks {unaligned}: no clock offset for their host, times left unshifted")
    reasons = sorted({c["reason"] for c in critical if c["reason"] is not None})
    if reasons:
        notes.append(f"no critical-path track: {reasons[0]}")
    elif not critical:
        notes.append("no critical-path track: the chosen steps have no stored critical path")
    return notes


class _Builder:
    """Chrome trace events, with a thread id per (rank, lane) and the metadata naming them."""

    def __init__(self, shifts: dict[int, dict]) -> None:
        self.shifts = shifts
        self.lanes: dict[tuple[int, str], int] = {}
        self.spans: list[dict[str, Any]] = []

    def _span(
        self, rank: int, lane: str, name: str, start_ns: int, dur_ns: int, args: dict, cat: str
    ) -> None:
        """One complete (ph X) event on a lane of a rank, its start on the reference clock."""
        tid = self.lanes.setdefault((rank, lane), sum(r == rank for r, _ in self.lanes) + 1)
        start = start_ns - self.shifts.get(rank, {}).get("offset_ns", 0)
        self.spans.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": rank,
                "tid": tid,
                "start_ns": start,
                "dur_ns": dur_ns,
            }
            | {"args": args}
        )

    def device_or_host(self, e: dict) -> None:
        """One trace event, on its stream's lane (GPU) or its thread's lane (host)."""
        lane = f"stream {e['stream']}" if e["stream"] is not None else f"thread {e['pid']}/{e['tid']}"
        args = {"kind": e["kind"], "step": e["step"], "unix_ns": e["ts_unix_ns"]}
        if e["correlation"] is not None:
            args["correlation"] = e["correlation"]
        for _ in range(e["copies"]):
            self._span(e["rank"], lane, e["name"], e["ts_unix_ns"], e["dur_ns"], args, e["cat"] or e["kind"])

    def exposed(self, x: dict) -> None:
        """One comm_exposure row with exposed time, over its whole interval."""
        keys = ("step", "name", "exposed_us", "exposed_wait_us", "exposed_transfer_us", "parallel_dim")
        args = {k: x[k] for k in (*keys, "phase")}
        label = f"exposed {x['label']} {x['exposed_us']:.1f} us"
        dur_ns = round(x["dur_us"] * 1000)
        self._span(x["rank"], EXPOSED_LANE, label, x["start_unix_ns"], dur_ns, args, "overlay")

    def idle(self, w: dict) -> None:
        """One idle_causes row, over its step window, named by its largest cause."""
        causes = {k: w[k] for k in ("idle_host_wait_us", "idle_device_wait_us", "idle_unknown_us")}
        known = {k: v for k, v in causes.items() if v}
        top = max(known, key=known.get).removeprefix("idle_").removesuffix("_us") if known else None
        name = f"idle {w['idle_us']:.1f} us" + (f" (mostly {top.replace('_', ' ')})" if top else "")
        args = {"step": w["step"], "idle_us": w["idle_us"], **causes}
        dur_ns = round(w["window_us"] * 1000)
        self._span(w["rank"], IDLE_LANE, name, w["window_start_unix_ns"], dur_ns, args, "overlay")

    def critical(self, c: dict) -> None:
        """One critical_path segment, on its rank's critical-path lane."""
        args = {"step": c["step"], "seq": c["seq"], "kind": c["kind"], "path_rank": c["path_rank"]}
        start_ns = c["window_start_unix_ns"] + round(c["start_us"] * 1000)
        name = f"{c['kind']}: {c['op']}" if c["op"] else c["kind"]
        self._span(c["rank"], CRITICAL_LANE, name, start_ns, round(c["dur_us"] * 1000), args, "critical_path")

    def document(self, ref: RunRef, steps: list[int], notes: list[str]) -> dict[str, Any]:
        """The whole Chrome trace JSON object."""
        base = min((s["start_ns"] for s in self.spans), default=0)
        events: list[dict[str, Any]] = []
        for rank in sorted({r for r, _ in self.lanes}):
            host = self.shifts.get(rank, {}).get("host")
            label = f"rank {rank}" + (f" ({host})" if host else "")
            events.append(_meta("process_name", rank, 0, name=label))
            events.append(_meta("process_sort_index", rank, 0, sort_index=rank))
        for (rank, lane), tid in self.lanes.items():
            events.append(_meta("thread_name", rank, tid, name=lane))
        for s in self.spans:
            start, dur = s.pop("start_ns"), s.pop("dur_ns")
            events.append({**s, "ts": (start - base) / 1000, "dur": dur / 1000})
        offsets = {str(r): s["offset_ns"] / 1000 for r, s in sorted(self.shifts.items())}
        other = {"study": ref.study, "run_id": ref.run_id, "steps": steps, "base_unix_ns": base}
        other |= {"clock_offsets_us": offsets, "notes": notes}
        return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def _meta(kind: str, pid: int, tid: int, **args: Any) -> dict[str, Any]:
    """A metadata (ph M) event naming or ordering a process or thread."""
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def _rows(connection: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = connection.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _write(out: Path, document: dict[str, Any]) -> None:
    """Write through a temporary file, so a failed export leaves no half file."""
    if not out.parent.is_dir():
        raise WarehouseError(f"{out}: its folder does not exist")
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps(document, separators=(",", ":")))
    os.replace(partial, out)
