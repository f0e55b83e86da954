"""The raw warehouse tables, declared once: column names, types and units.

The parser produces these frames (without the `study`, `run_id`, `rank` keys, which ingest
adds); the warehouse stores them; the SQL views read them. Times are absolute epoch
nanoseconds (`*_unix_ns`), durations integer nanoseconds (`*_ns`).
"""

from __future__ import annotations

import polars as pl

# Normalised event kinds (`events.kind`), decided from the Kineto category.
KIND_BY_CATEGORY: dict[str, str] = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "runtime": "runtime",
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
    "cuda_sync": "cuda_sync",
    "python_function": "python_function",
}
OTHER_KIND = "other"
# Categories of kind `other` that tracehouse knows and ignores on purpose (the profiler's own
# span, its overhead); any other unknown category is named in `traces.unknown_categories`.
IGNORED_CATEGORIES = frozenset({"Trace", "overhead"})
EVENT_KINDS = sorted({*KIND_BY_CATEGORY.values(), OTHER_KIND})

RUN_KEYS: dict[str, pl.DataType] = {"study": pl.String, "run_id": pl.String, "rank": pl.Int32}

# One row per complete (`ph: X`) event of a rank trace.
EVENTS: dict[str, pl.DataType] = {
    # normalised from `cat`, case-insensitive (Kernel -> kernel, cuda_driver -> runtime,
    # Operator -> cpu_op; a missing or unknown category -> other); one of EVENT_KINDS
    "kind": pl.String,
    "cat": pl.String,  # the category as written in the trace
    "name": pl.String,
    "ts_unix_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "pid": pl.String,  # as written (numbers and strings mix); GPU events: the device
    "tid": pl.String,  # as written; GPU events: the stream
    "stream": pl.Int64,  # args.stream when numeric; GPU events have one
    "device": pl.Int32,  # args.device
    "correlation": pl.Int64,  # args.correlation: ties a launch to its GPU event
    "external_id": pl.Int64,  # args["External id"]
    # GPU events: start of the earliest runtime/driver call with the same correlation
    # (the launch); NULL when the launch is not in the trace
    "launch_ts_unix_ns": pl.Int64,
}

# One row per step number on the rank's loop thread (the (pid, tid) holding the most host
# `ProfilerStep#N` events): its earliest `ProfilerStep#N` event. See steps.
STEPS: dict[str, pl.DataType] = {
    "step": pl.Int64,  # N of `ProfilerStep#N`
    "ts_unix_ns": pl.Int64,  # start of the ProfilerStep event (host time)
    "dur_ns": pl.Int64,
    "pid": pl.String,  # the loop thread's pid
    "tid": pl.String,  # the loop thread's tid
}

# One row per collective call per rank, as seen in the trace.
COLLECTIVES: dict[str, pl.DataType] = {
    "op": pl.String,  # all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send, recv, ...
    "process_group": pl.String,  # pg name; NULL when the trace cannot tell
    "pg_desc": pl.String,  # pg description, e.g. default_pg; NULL when the trace cannot tell
    "seq": pl.Int64,  # sequence number within the group; NULL when the trace has none
    "bytes": pl.Int64,  # message size, nccl-tests convention (all_gather: the total output)
    "dtype": pl.String,  # e.g. float32, bfloat16
    "group_size": pl.Int32,  # ranks in the process group
    "ts_unix_ns": pl.Int64,  # start of the transfer (device kernel, or gloo span)
    "dur_ns": pl.Int64,
    "source": pl.String,  # nccl_kernel | record_param_comms | gloo | label | cpu_annotation
    "name": pl.String,  # the event the row came from
    "tid": pl.String,  # the thread of that event
}

# One row per (pid, tid) named by a `thread_name` event (`ph: M`), plus one per pid named only
# by `process_name` (with the tid of its first `process_name` event).
THREADS: dict[str, pl.DataType] = {
    "pid": pl.String,
    "tid": pl.String,
    "thread_name": pl.String,  # the last `thread_name` of the thread; NULL for a process-only row
    "process_name": pl.String,  # the pid's `process_name`
}

# One row per process group in distributedInfo.pg_config.
PROCESS_GROUPS: dict[str, pl.DataType] = {
    "process_group": pl.String,  # pg_name
    "pg_desc": pl.String,  # e.g. default_pg
    "backend_config": pl.String,  # e.g. cuda:nccl, cpu:gloo,cuda:gloo
    "group_size": pl.Int32,  # pg_size
    "ranks": pl.List(pl.Int32),  # the global ranks in the group
}

# One row per power sample (the public `power_samples` adds nothing but the run key).
POWER_SAMPLES: dict[str, pl.DataType] = {
    "host": pl.String,
    "device": pl.Int32,
    "ts_unix_ns": pl.Int64,
    "power_w": pl.Float64,
    "energy_counter_j": pl.Float64,  # cumulative hardware counter; NULL when the log has none
    "temperature_c": pl.Float64,
    "gpu_util_pct": pl.Float64,
    "mem_used_mib": pl.Float64,
    "source": pl.String,  # nvml | dcgmi | nvidia-smi | dcgm-exporter
    "clock": pl.String,  # how ts was taken, e.g. host-realtime, nvidia-smi-localtime
}

# One row per file that could not be ingested (latest attempt per path, hash and reason).
INGEST_ERRORS: dict[str, pl.DataType] = {
    "path": pl.String,
    "content_hash": pl.String,
    "reason": pl.String,
    "at": pl.Datetime("us", "UTC"),
    "internal": pl.Boolean,
    "severity": pl.String,  # error (not loaded) | warning (loaded, with this problem)
}


def empty_frame(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """An empty frame with exactly the given columns and types."""
    return pl.DataFrame(schema=schema)
