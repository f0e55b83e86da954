"""Store the critical paths and op slack of a study's measured runs (`tracehouse critical-path`).

Each run is replayed with its measured durations (the identity replay) and its steps' paths are
written to `critical_path_segments` and `op_slack_rows`, replacing the run's earlier rows in one
transaction; a run that cannot be replayed gets one segment row with its reason instead, so the
`critical_path` view never shows a run silently empty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import duckdb
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.build import build_run_graph
from tracehouse.pipeline.projection.critical import StepPath, step_paths
from tracehouse.pipeline.projection.timeline import load_run

RUN_TABLES = ("critical_path_segments", "op_slack_rows")
SEGMENT_COLUMNS = (
    "study, run_id, step, path_rank, step_us, seq, rank, kind, op, start_us, dur_us, reason, traces_digest"
)
# What the rows were computed from: the critical_path view recomputes it to tell stale rows.
TRACES_DIGEST = """SELECT md5(string_agg(content_hash, ',' ORDER BY content_hash)) FROM traces
                   WHERE study = ? AND run_id = ?"""
SLACK_COLUMNS = "study, run_id, step, rank, op, kind, calls, dur_us, slack_us"


@dataclass
class StudyPaths:
    """Per run: its replayed steps' paths, or why it has none."""

    paths: dict[str, list[StepPath]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def run_paths(connection: duckdb.DuckDBPyConnection, study: str, run_id: str) -> list[StepPath]:
    """The run's steps' critical paths in its identity replay; a run without steps is refused."""
    run = build_run_graph(load_run(connection, study, run_id))
    paths = step_paths(run, run.graph.measured_weights(run.transfer_ns))
    if not paths:
        raise TracehouseError("no step window to replay (no device work or main thread in a step)")
    return paths


def study_paths(
    connection: duckdb.DuckDBPyConnection,
    study: str,
    run_id: str | None,
    progress: Callable[[str], None] | None = None,
) -> StudyPaths:
    """Every run of the study (or the one run): its paths, or the one-line reason it has none."""
    runs = study_run_ids(connection, study)
    if run_id is not None and run_id not in runs:
        raise TracehouseError(f"no run {study}/{run_id} in the warehouse (runs: {', '.join(runs)})")
    runs = [run_id] if run_id is not None else runs
    out = StudyPaths()
    for run in runs:
        if progress is not None:
            progress(f"replaying {study}/{run}")
        try:
            out.paths[run] = run_paths(connection, study, run)
        except TracehouseError as exc:
            out.failed[run] = str(exc).splitlines()[0]
    return out


def study_run_ids(connection: duckdb.DuckDBPyConnection, study: str) -> list[str]:
    """Every run of the study in `runs`; none is a TracehouseError naming the study."""
    runs = [
        r
        for (r,) in connection.execute(
            "SELECT run_id FROM runs WHERE study = ? ORDER BY 1", [study]
        ).fetchall()
    ]
    if not runs:
        raise TracehouseError(f"no run in study {study!r}")
    return runs


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
    from tracehouse.pipeline.warehouse import transaction

    segments: list[tuple] = []
    slack: list[tuple] = []
    for run, paths in result.paths.items():
        digest = connection.execute(TRACES_DIGEST, [study, run]).fetchall()[0][0]
        segments += [(*row, digest) for row in segment_rows(study, run, paths)]
        slack += slack_rows(study, run, paths)
    for run, why in result.failed.items():
        digest = connection.execute(TRACES_DIGEST, [study, run]).fetchall()[0][0]
        segments.append((study, run, *([None] * 9), why, digest))
    for table in RUN_TABLES:  # a warehouse made before these tables existed
        connection.execute(resources.files("tracehouse.sql").joinpath(f"raw/{table}.sql").read_text("utf-8"))
    with transaction(connection):
        for run in [*result.paths, *result.failed]:
            for table in RUN_TABLES:
                connection.execute(f"DELETE FROM {table} WHERE study = ? AND run_id = ?", [study, run])
        _insert(connection, "critical_path_segments", SEGMENT_COLUMNS, segments)
        _insert(connection, "op_slack_rows", SLACK_COLUMNS, slack)
    return len(segments)


def _insert(connection: duckdb.DuckDBPyConnection, table: str, columns: str, rows: list[tuple]) -> None:
    """Insert rows stamped with the transaction's time (computed_at)."""
    if not rows:
        return
    marks = ", ".join("?" for _ in columns.split(","))
    connection.executemany(
        f"INSERT INTO {table} ({columns}, computed_at) VALUES ({marks}, current_timestamp)",
        [list(r) for r in rows],
    )


def compute_and_store(
    warehouse_dir: Path, *, study: str, run_id: str | None, progress: Callable[[str], None] | None = None
) -> StudyPaths:
    """Replay the study's runs (or one), store their paths and slack; the result per run."""
    from tracehouse.pipeline.reading import open_reader
    from tracehouse.pipeline.warehouse import connect

    with open_reader(warehouse_dir) as connection:
        result = study_paths(connection, study, run_id, progress)
    with connect(warehouse_dir) as connection:
        store_paths(connection, study, result)
    return result
