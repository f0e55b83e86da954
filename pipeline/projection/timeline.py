"""What the replay reads of one run: its ranks' device work, host calls, steps and collectives.

One query per relation, filtered to the run; every frame is sorted so the graph builder can walk
it in order. GPU ranks are the ranks with rows in `gpu_events`; the others are CPU-only ranks,
whose main thread (`cpu_main_threads`) plays the device (METHODOLOGY "Steps on a CPU-only trace").
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass, field
from typing import Any

import duckdb
import polars as pl
from tracehouse.collectors.model_sizes import ModelConfig, fsdp_unit_params
from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.pipeline.ops.costs import FORMULA_OF

RUN_FILTER = "study = $study AND run_id = $run_id"
# The parallel_dim values (comm_exposure) of process groups that grow with data parallelism: the
# data-parallel mesh dimensions and the whole world (default_pg).
DATA_PARALLEL_DIMS = ("dp", "dp_shard", "dp_replicate", "world")

FORMULA_NAMES = ", ".join(f"'{name}'" for name in sorted(FORMULA_OF))  # the ops with a formula, as SQL
QUERIES = {
    "device": f"""
        WITH launched AS (  -- the host op that launched each GPU event (op_launches: the same events)
            SELECT rank, correlation, ts_unix_ns, name, min(op_id) AS op_id
            FROM op_launches WHERE {RUN_FILTER} AND op_id IS NOT NULL
            GROUP BY ALL
        )
        SELECT g.rank, g.class, g.name, g.stream, g.start_ns, g.end_ns, g.launch_ns, g.correlation,
            l.op_id AS launch_op_id
        FROM gpu_events AS g
        LEFT JOIN launched AS l
            ON l.rank = g.rank AND l.correlation = g.correlation AND l.ts_unix_ns = g.start_ns
            AND l.name = g.name
        WHERE g.{RUN_FILTER.replace(" AND ", " AND g.")}
        ORDER BY g.rank, g.stream, g.start_ns, g.end_ns""",
    "runtime": f"""
        SELECT rank, tid, name, ts_unix_ns AS start_ns, ts_unix_ns + dur_ns AS end_ns, correlation
        FROM events WHERE {RUN_FILTER} AND kind = 'runtime' AND dur_ns >= 0
          AND rank IN (SELECT DISTINCT rank FROM gpu_events WHERE {RUN_FILTER})
        ORDER BY rank, start_ns, end_ns""",
    "steps": f"""
        SELECT s.rank, s.step, s.ts_unix_ns AS start_ns, s.ts_unix_ns + s.dur_ns AS end_ns
        FROM steps AS s
        WHERE s.{RUN_FILTER.replace(" AND ", " AND s.")}
          AND (s.rank IN (SELECT DISTINCT rank FROM gpu_events WHERE {RUN_FILTER})
               OR (s.pid, s.tid) IN (
                   SELECT (m.pid, m.tid) FROM cpu_main_threads AS m
                   WHERE m.{RUN_FILTER.replace(" AND ", " AND m.")} AND m.rank = s.rank))
        ORDER BY s.rank, s.ts_unix_ns""",
    "optimizer": f"""
        SELECT rank, ts_unix_ns AS start_ns, ts_unix_ns + dur_ns AS end_ns
        FROM events WHERE {RUN_FILTER} AND starts_with(name, 'Optimizer.') AND dur_ns > 0
        ORDER BY rank, start_ns""",
    "comm": f"""
        WITH dims AS (
            SELECT DISTINCT rank, start_unix_ns, name, parallel_dim
            FROM comm_exposure WHERE {RUN_FILTER}
        )
        SELECT c.rank, c.rule, c.name, c.start_ns, c.end_ns, c.stream, c.tid, c.op, c.process_group,
               c.seq, c.bytes, c.dtype, c.group_size, c.transfer_ns, c.phase,
               coalesce(d.parallel_dim, 'unknown') AS parallel_dim
        FROM comm_intervals AS c
        LEFT JOIN dims AS d ON c.rank = d.rank AND c.start_ns = d.start_unix_ns AND c.name = d.name
        WHERE c.{RUN_FILTER.replace(" AND ", " AND c.")}
        ORDER BY c.rank, c.start_ns, c.end_ns, c.name""",
    "backward": f"""
        SELECT rank, ts_unix_ns AS start_ns, ts_unix_ns + dur_ns AS end_ns
        FROM events WHERE {RUN_FILTER} AND starts_with(name, 'autograd::engine::evaluate_function:')
          AND dur_ns > 0
        ORDER BY rank, start_ns""",
    # ScheduleGPipe's span of each micro-batch's backward (`Backward <i>`, torch.distributed.pipelining):
    # where a pipeline stage's last micro-batch makes its gradients ready.
    "microbatch_backward": f"""
        SELECT rank, ts_unix_ns AS start_ns, ts_unix_ns + dur_ns AS end_ns
        FROM events WHERE {RUN_FILTER} AND regexp_full_match(name, 'Backward [0-9]+') AND dur_ns > 0
        ORDER BY rank, start_ns""",
    "fsdp_hooks": f"""
        SELECT rank, name, ts_unix_ns AS start_ns, ts_unix_ns + dur_ns AS end_ns
        FROM events WHERE {RUN_FILTER} AND starts_with(name, 'FSDP::') AND dur_ns >= 0
        ORDER BY rank, start_ns""",
    # Each piece of main-thread compute (the CPU rule's segments); `load_run` adds the op it is the
    # self time of: the innermost cpu_op of the main thread that holds it (`innermost_calls`).
    "cpu_compute": f"""
        SELECT rank, start_ns, end_ns FROM cpu_compute_segments
        WHERE {RUN_FILTER} ORDER BY rank, start_ns""",
    # The main thread's cpu_ops, the calls a compute segment is the self time of.
    "main_calls": f"""
        SELECT o.rank, o.ts_unix_ns AS start_ns, o.ts_unix_ns + o.dur_ns AS end_ns, o.name, o.op_id
        FROM ops AS o
        JOIN cpu_main_threads AS m
            ON m.study = o.study AND m.run_id = o.run_id AND m.rank = o.rank AND m.pid = o.pid
               AND m.tid = o.tid
        WHERE o.{RUN_FILTER.replace(" AND ", " AND o.")} AND o.kind = 'cpu_op' AND o.dur_ns > 0
        ORDER BY o.rank, start_ns""",
    # The main-thread calls with counted FLOPs or bytes (op_calls.counted_flops, counted_bytes: the
    # once-only rule) of ops with a formula, in order: tensor parallelism splits those of
    # efficiency.SPLIT_CLASSES (matmul, attention) with FLOPs and places its collectives at the
    # matmuls; a pipeline times each at a micro-batch's share by its category's efficiency curve.
    "counted_ops": f"""
        SELECT c.rank, c.op_id, c.name, c.phase, c.step, o.ts_unix_ns AS start_ns,
               o.ts_unix_ns + o.dur_ns AS end_ns, coalesce(c.counted_flops, 0) AS flops,
               coalesce(c.counted_bytes, 0) AS bytes
        FROM op_calls AS c
        JOIN ops AS o ON o.study = c.study AND o.run_id = c.run_id AND o.rank = c.rank AND o.op_id = c.op_id
        WHERE c.{RUN_FILTER.replace(" AND ", " AND c.")} AND NOT c.gpu_rank AND c.on_timeline
          AND (c.counted_flops > 0 OR c.counted_bytes > 0) AND c.name IN ({FORMULA_NAMES})
        ORDER BY c.rank, o.ts_unix_ns""",
    "windows": f"""
        SELECT rank, step, window_start_unix_ns, window_us
        FROM step_breakdown WHERE {RUN_FILTER} ORDER BY rank, window_start_unix_ns""",
    # Each rank's host clock minus the reference host's (clock_offsets), applied to arrivals only.
    "offsets": """
        SELECT t.rank, CAST(round(o.offset_us * 1000) AS BIGINT) AS offset_ns
        FROM traces AS t
        JOIN clock_offsets AS o ON o.study = t.study AND o.run_id = t.run_id AND o.host = t.host
        WHERE t.study = $study AND t.run_id = $run_id AND t.rank IS NOT NULL
        ORDER BY t.rank""",
}


# The op calls the interference fit compares (projection/interference.py): on CPU ranks every
# compute call on the timeline with its span and self time, on GPU ranks the signature of each op
# that launched device work (its kernels are the graph's compute edges).
OP_SIGNATURES = f"""
    SELECT c.rank, c.gpu_rank, c.op_id, c.name, o.input_dims, o.input_types, c.phase,
           o.ts_unix_ns AS start_ns, o.ts_unix_ns + o.dur_ns AS end_ns, c.self_ns
    FROM op_calls AS c
    JOIN ops AS o ON o.study = c.study AND o.run_id = c.run_id AND o.rank = c.rank AND o.op_id = c.op_id
    WHERE c.{RUN_FILTER.replace(" AND ", " AND c.")} AND c.on_timeline
      AND (c.gpu_rank AND c.device_events > 0 OR NOT c.gpu_rank AND c.self_ns > 0)
    ORDER BY c.rank, o.ts_unix_ns"""


def op_signatures_frame(connection: duckdb.DuckDBPyConnection, study: str, run_id: str) -> pl.DataFrame:
    """The run's rows of OP_SIGNATURES."""
    return connection.sql(OP_SIGNATURES, params={"study": study, "run_id": run_id}).pl()


# Bytes per element of a manifest's dtype (the model's parameters and gradients).
DTYPE_BYTES = {
    "fp32": 4,
    "float32": 4,
    "tf32": 4,
    "bf16": 2,
    "fp16": 2,
    "float16": 2,
    "bfloat16": 2,
    "fp64": 8,
}


@dataclass(frozen=True)
class RunFacts:
    """The manifest facts a projection needs (NULLs when the run has no manifest)."""

    study: str
    run_id: str
    strategy: str | None
    world_size: int
    nodes: int | None
    devices_per_node: int | None
    dp: int | None
    tp: int | None
    pp: int | None
    tokens_per_step: int | None
    global_batch: int | None  # sequences per step, all data-parallel ranks together
    device_type: str | None
    n_params: int | None
    dtype: str | None
    fsdp_units: dict[str, int]  # FSDP unit ("" the root) -> parameters (`manifest_units`)
    device_name: str | None = None  # as the manifest or the traces name it (hardware tables)
    model: ModelConfig | None = None  # the manifest's model_config, where it is tracehouse's reference Llama

    @property
    def data_parallel(self) -> int:
        """The data-parallel degree: the manifest's dp, else world size / (tp x pp)."""
        return self.dp or max(1, self.world_size // ((self.tp or 1) * (self.pp or 1)))


@dataclass(frozen=True)
class RunTimeline:
    """One run as the replay reads it: one frame per relation (see QUERIES)."""

    facts: RunFacts
    device: pl.DataFrame
    runtime: pl.DataFrame
    steps: pl.DataFrame
    optimizer: pl.DataFrame
    backward: pl.DataFrame
    microbatch_backward: pl.DataFrame
    fsdp_hooks: pl.DataFrame
    comm: pl.DataFrame
    cpu_compute: pl.DataFrame
    counted_ops: pl.DataFrame
    windows: pl.DataFrame
    offsets: pl.DataFrame

    @property
    def gpu_ranks(self) -> list[int]:
        return sorted(set(self.device["rank"].to_list()))

    def measured_windows(self) -> dict[int | None, dict[int, float]]:
        """Per step, per rank: the measured window (step_breakdown.window_us)."""
        out: dict[int | None, dict[int, float]] = {}
        for rank, step, _, window_us in self.windows.iter_rows():
            out.setdefault(step, {})[rank] = window_us
        return out

    def clock_offsets_ns(self) -> dict[int, int]:
        """Per rank: its host's estimated clock offset against the run's reference host (ns)."""
        return dict(self.offsets.select(["rank", "offset_ns"]).iter_rows())

    @property
    def cpu_ranks(self) -> list[int]:
        gpu = set(self.gpu_ranks)
        return sorted(set(self.steps["rank"].to_list()) - gpu)


def load_run(connection: duckdb.DuckDBPyConnection, study: str, run_id: str) -> RunTimeline:
    """Read one run; a run the warehouse does not hold is a WarehouseError."""
    facts = run_facts(connection, study, run_id)
    params = {"study": study, "run_id": run_id}
    frames: dict[str, Any] = {name: connection.sql(sql, params=params).pl() for name, sql in QUERIES.items()}
    frames["cpu_compute"] = innermost_calls(frames["cpu_compute"], frames.pop("main_calls"))
    return RunTimeline(facts=facts, **frames)


@dataclass
class LoadedRuns:
    """The runs one command has read, each read once: `--search` projects every run of a study in
    each layout it tries, from the same warehouse."""

    runs: dict[tuple[str, str], RunTimeline] = field(default_factory=dict)
    studies: dict[str, list[tuple]] = field(default_factory=dict)

    def measured_runs(self, connection: duckdb.DuckDBPyConnection, study: str) -> list[tuple]:
        """The study's runs with a measured step time, by run id: (run_id, world_size,
        tokens_per_step, step_time_us, tokens_per_s_per_device, strategy, tp, pp), read at the
        first call (`scale_points` is a view over every step)."""
        if study not in self.studies:
            self.studies[study] = connection.execute(
                """SELECT r.run_id, r.world_size, r.tokens_per_step, s.step_time_us,
                          s.tokens_per_s_per_device, r.strategy, coalesce(r.tp, 1), coalesce(r.pp, 1)
                   FROM runs AS r JOIN scale_points AS s USING (study, run_id)
                   WHERE r.study = ? AND s.step_time_us > 0
                   ORDER BY r.run_id""",
                [study],
            ).fetchall()
        return self.studies[study]

    def load(self, connection: duckdb.DuckDBPyConnection, study: str, run_id: str) -> RunTimeline:
        """`load_run`'s timeline, read at the first call for the run."""
        key = (study, run_id)
        if key not in self.runs:
            self.runs[key] = load_run(connection, study, run_id)
        return self.runs[key]


def innermost_calls(segments: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """`segments` (rank, start_ns, end_ns; disjoint on each rank) with the name and op_id of the
    innermost of `calls` (rank, start_ns, end_ns, name, op_id) that holds each: the one that started
    last, of equal starts the one that ends first, of equal spans the later op_id (NULL where none
    holds it). One sweep per rank in start order: the calls started by a segment's start wait in a
    heap ordered so, and a call ending before a segment ends is dropped for good (the segments
    after it start later)."""
    names: list[str | None] = []
    op_ids: list[int | None] = []
    by_rank = {key[0]: frame for key, frame in calls.partition_by("rank", as_dict=True).items()}
    for (rank,), frame in segments.partition_by("rank", as_dict=True, maintain_order=True).items():
        # `segments` is in rank order (its query's), so the answers line up with its rows
        held = by_rank.get(rank, calls.clear()).sort("start_ns", "end_ns", "op_id")
        starts, ends = held["start_ns"].to_list(), held["end_ns"].to_list()
        ids, call_names = held["op_id"].to_list(), held["name"].to_list()
        heap: list[tuple[int, int, int, int]] = []
        i = 0
        for start, end in frame.select("start_ns", "end_ns").iter_rows():
            while i < len(starts) and starts[i] <= start:
                heapq.heappush(heap, (-starts[i], ends[i], -ids[i], i))
                i += 1
            while heap and heap[0][1] < end:
                heapq.heappop(heap)
            names.append(call_names[heap[0][3]] if heap else None)
            op_ids.append(ids[heap[0][3]] if heap else None)
    return segments.with_columns(
        pl.Series("name", names, dtype=pl.String), pl.Series("op_id", op_ids, dtype=calls.schema["op_id"])
    )


def run_facts(connection: duckdb.DuckDBPyConnection, study: str, run_id: str) -> RunFacts:
    """The `runs` row of the run."""
    row = connection.execute(
        """SELECT r.study, r.run_id, r.strategy, r.world_size, r.nodes, r.devices_per_node, r.dp, r.tp,
                  r.pp, r.tokens_per_step, r.global_batch, r.device_type, r.n_params, r.dtype, m.fsdp_units,
                  r.device_name, m.model_config
           FROM runs AS r
           LEFT JOIN run_manifests AS m ON m.study = r.study AND m.run_id = r.run_id
           WHERE r.study = ? AND r.run_id = ?""",
        [study, run_id],
    ).fetchall()
    if not row:
        raise WarehouseError(f"no run {study}/{run_id} in the warehouse")
    *facts, units, device, model = row[0]
    tp = facts[7] or 1
    config = reference_model(model)
    return RunFacts(*facts, fsdp_units=manifest_units(units, config, tp), device_name=device, model=config)


def reference_model(model_config: str | None) -> ModelConfig | None:
    """A manifest's `model_config` where it describes tracehouse's reference Llama, else None."""
    try:
        return ModelConfig(**json.loads(model_config or "null"))
    except (TypeError, ValueError, ArithmeticError):
        return None


def manifest_units(units: str | None, config: ModelConfig | None, tp: int) -> dict[str, int]:
    """Parameters per FSDP unit on one data-parallel rank: the manifest's `fsdp_units`, else those of
    its reference model (`reference_model`: every block a unit, the root the rest:
    collectors/model_sizes.py; split over tp as tracehouse collect does), else none."""
    stated = json.loads(units) if units else {}
    if stated:
        return stated
    if config is None:
        return {}
    return {unit: params // tp for unit, params in fsdp_unit_params(config).items()}
