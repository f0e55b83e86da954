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

# One row per host op-tree event (kinds cpu_op, python_function, user_annotation) of a rank
# trace. The tree is per (pid, tid): an op's parent is the innermost host event of those kinds
# on the same thread whose [ts, ts + dur] encloses it (ties: the longer, then the earlier in the
# file, is outside). Args are kept as written. See kineto/ops.
OPS: dict[str, pl.DataType] = {
    "op_id": pl.Int64,  # the event's index among the trace's complete (ph X) events: unique per rank
    "parent_id": pl.Int64,  # op_id of the innermost enclosing host event; NULL at top level
    "depth": pl.Int32,  # 0 at top level, parent's depth + 1 below
    "kind": pl.String,  # cpu_op | python_function | user_annotation
    "name": pl.String,
    "ts_unix_ns": pl.Int64,
    "dur_ns": pl.Int64,
    "pid": pl.String,
    "tid": pl.String,
    "external_id": pl.Int64,  # args["External id"]
    "sequence_number": pl.Int64,  # args["Sequence number"] (autograd), NULL unless an integer
    "fwd_thread_id": pl.Int64,  # args["Fwd thread id"]: set on backward ops, NULL unless an integer
    "input_dims": pl.String,  # args["Input Dims"]: the JSON text as written, NULL when absent
    "input_types": pl.String,  # args["Input type"]: JSON text as written
    "concrete_inputs": pl.String,  # args["Concrete Inputs"]: JSON text as written
    # the nn.Module path above the op (itself included): the names of the enclosing
    # `nn.Module: X` python_function events, outermost first, joined by "/" (prefix dropped);
    # NULL where no module event encloses it (a trace without with_modules)
    "module": pl.String,
}

# One row per GPU event (kind kernel, memcpy, memset) of a rank trace: which host op launched it.
OP_LAUNCHES: dict[str, pl.DataType] = {
    "event_id": pl.Int64,  # the GPU event's index among the trace's complete events (as ops.op_id)
    "kind": pl.String,  # kernel | memcpy | memset
    "name": pl.String,
    "ts_unix_ns": pl.Int64,  # start on the device
    "dur_ns": pl.Int64,
    "stream": pl.Int64,
    "correlation": pl.Int64,
    # the innermost cpu_op enclosing the runtime call with the same correlation (earliest such
    # call), on that call's thread; else the cpu_op with the GPU event's External id (2020-2021
    # traces link so); NULL when neither is in the trace
    "op_id": pl.Int64,
    # backward kernels: the forward op of their autograd node. The launching op or its nearest
    # cpu_op ancestor with a non-zero `Fwd thread id` (a backward op) gives a sequence number;
    # the forward op is the outermost cpu_op with that number and `Fwd thread id` 0 or none on
    # the same pid (then the earliest, then the lowest op_id); NULL for forward kernels
    "fwd_op_id": pl.Int64,
    "module": pl.String,  # the module path of op_id, else of fwd_op_id (backward kernels)
}

# One row per host cpu_op call of a rank trace, with what the op views sum (computed from the
# trace's OPS, OP_LAUNCHES and STEPS by pipeline/ops/calls.py; the rules: sql/raw/op_calls.sql).
OP_CALLS: dict[str, pl.DataType] = {
    "gpu_rank": pl.Boolean,  # the trace has GPU events
    "on_timeline": pl.Boolean,  # the call is on the timeline the breakdown measures
    "step": pl.Int64,  # the ProfilerStep whose host window holds the call's start; NULL outside
    "op_id": pl.Int64,  # the call (ops.op_id)
    "name": pl.String,
    "module": pl.String,  # its module path, else that of the forward op its kernels are linked to
    "phase": pl.String,  # forward | backward | optimizer
    "self_ns": pl.Int64,  # its duration less its direct children's, at least 0
    "device_ns": pl.Int64,  # the GPU events it launched itself
    "device_events": pl.Int64,
    "flops": pl.Int64,  # its formula's FLOPs (docs/flops.md); NULL without one
    "counted_flops": pl.Int64,  # counted once: 0 where a descendant does work; NULL without a formula
    "counted_bytes": pl.Int64,  # counted once: 0 also inside a counted unit of work
    "dtype": pl.String,  # the compute dtype whose peak bounds it
    "formulas_version": pl.String,  # the formulas that costed it (pipeline/ops/version.py)
}

# One row per `[memory]` instant event (ph i; profile_memory=True): an allocation (bytes > 0)
# or a free (bytes < 0) by the caching allocator. Values as written (bytes).
MEMORY_EVENTS: dict[str, pl.DataType] = {
    "ts_unix_ns": pl.Int64,
    "pid": pl.String,
    "tid": pl.String,
    "device_type": pl.Int32,  # args["Device Type"]: c10 DeviceType (0 CPU, 1 CUDA/HIP)
    "device": pl.Int32,  # args["Device Id"]: -1 for CPU
    "addr": pl.Int64,  # args["Addr"]
    "bytes": pl.Int64,  # args["Bytes"]: signed, negative for a free
    "total_allocated": pl.Int64,  # args["Total Allocated"] on that device after the event
    "total_reserved": pl.Int64,  # args["Total Reserved"] on that device after the event
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
