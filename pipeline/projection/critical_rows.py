"""Store the critical paths and op slack of the runs `tracehouse project` replays.

Each run's identity replay (its measured durations) gives its steps' paths, written to
`critical_path_segments` and `op_slack_rows`, replacing the run's earlier rows in one
transaction; a run that cannot be replayed gets one segment row with its reason instead, so the
`critical_path` view never shows a run silently empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.build import RunGraph, build_run_graph
from tracehouse.pipeline.projection.critical import StepPath, step_paths
from tracehouse.pipeline.projection.timeline import LoadedRuns, RunTimeline, load_run
from tracehouse.pipeline.warehouse.sql_runner import raw_ddl

RUN_TABLES = ("critical_path_segments", "op_slack_rows")
SEGMENT_COLUMNS = (
    "study, run_id, step, path_rank, step_us, seq, rank, kind, op, start_us, dur_us, op_id, reason, "
    "traces_digest"
)
# What the rows were computed from: the critical_path view recomputes it to tell stale rows.
TRACES_DIGEST = """SELECT md5(string_agg(content_hash, ',' ORDER BY content_hash)) FROM traces
                   WHERE study = ? AND run_id = ?"""
SLACK_COLUMNS = "study, run_id, step, rank, op, kind, calls, dur_us, slack_us"


def built_run(
    connection: duckdb.DuckDBPyConnection, study: str, run_id: str, loaded: LoadedRuns | None = None
) -> tuple[RunTimeline, RunGraph]:
    """The run's timeline (from `loaded` where given) and its replay graph."""
    timeline = loaded.load(connection, study, run_id) if loaded else load_run(connection, study, run_id)
    return timeline, build_run_graph(timeline)


def run_paths(run: RunGraph) -> list[StepPath]:
    """The run's steps' critical paths in its identity replay; a run without steps is refused."""
    paths = step_paths(run, run.graph.measured_weights(run.transfer_ns))
    if not paths:
        raise TracehouseError("no step window to replay (no device work or main thread in a step)")
    return paths


@dataclass
class StudyPaths:
    """Per run: its replayed steps' paths, or why it has none."""

    paths: dict[str, list[StepPath]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    def replay(
        self,
        connection: duckdb.DuckDBPyConnection,
        study: str,
        run_id: str,
        loaded: LoadedRuns | None = None,
    ) -> tuple[RunTimeline, RunGraph]:
        """Build the run's graph (its timeline from `loaded` where given) and record its paths, or
        the one-line reason it has none (the error is raised again: the caller cannot replay the run
        either)."""
        try:
            timeline, run = built_run(connection, study, run_id, loaded)
            self.paths[run_id] = run_paths(run)
        except TracehouseError as exc:
            self.failed[run_id] = str(exc).splitlines()[0]
            if run_id in self.paths:  # built, but without a step window: the projection may say more
                del self.paths[run_id]
            raise
        return timeline, run


def segment_rows(study: str, run_id: str, paths: list[StepPath]) -> list[tuple]:
    """The rows of critical_path_segments of one run (µs)."""
    return [
        (
            study,
            run_id,
            p.step,
            p.rank,
            p.step_ns / 1e3,
            seq,
            s.rank,
            s.kind,
            s.op,
            s.start_ns / 1e3,
            s.dur_ns / 1e3,
            s.op_id,
            None,
        )
        for p in paths
        for seq, s in enumerate(p.segments)
    ]


def slack_rows(study: str, run_id: str, paths: list[StepPath]) -> list[tuple]:
    """The rows of op_slack_rows of one run (µs)."""
    return [
        (
            study,
            run_id,
            p.step,
            o.rank,
            o.op,
            o.kind,
            o.calls,
            o.dur_ns / 1e3,
            None if o.slack_ns is None else o.slack_ns / 1e3,
        )
        for p in paths
        for o in p.slack
    ]


def store_paths(connection: duckdb.DuckDBPyConnection, study: str, result: StudyPaths) -> int:
    """Replace the rows of every run in `result`; returns the segment rows written."""
    from tracehouse.pipeline.warehouse.database import transaction

    segments: list[tuple] = []
    slack: list[tuple] = []
    for run, paths in result.paths.items():
        digest = connection.execute(TRACES_DIGEST, [study, run]).fetchall()[0][0]
        segments += [(*row, digest) for row in segment_rows(study, run, paths)]
        slack += slack_rows(study, run, paths)
    for run, why in result.failed.items():
        digest = connection.execute(TRACES_DIGEST, [study, run]).fetchall()[0][0]
        segments.append((study, run, *([None] * 10), why, digest))
    for table in RUN_TABLES:  # a warehouse made before these tables existed
        connection.execute(raw_ddl(table))
    with transaction(connection):
        for run in [*result.paths, *result.failed]:
            for table in RUN_TABLES:
                connection.execute(f"DELETE FROM {table} WHERE study = ? AND run_id = ?", [study, run])
        _insert(connection, "critical_path_segments", SEGMENT_COLUMNS, segments)
        _insert(connection, "op_slack_rows", SLACK_COLUMNS, slack)
    return len(segments)


def _insert(connection: duckdb.DuckDBPyConnection, table: str, columns: str, rows: list[tuple]) -> None:
    """Insert rows stamped with the transaction's time (computed_at), as one Arrow batch (a run's
    path on a CPU rank is tens of thousands of segments: row by row took seconds per thousand)."""
    import polars as pl

    if not rows:
        return
    names = [c.strip() for c in columns.split(",")]
    frame = pl.DataFrame(rows, schema=names, orient="row", infer_schema_length=None, strict=False)
    connection.register("new_rows", frame.to_arrow())
    try:
        connection.execute(
            f"INSERT INTO {table} ({columns}, computed_at) SELECT {columns}, current_timestamp FROM new_rows"
        )
    finally:
        connection.unregister("new_rows")
