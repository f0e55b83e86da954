-- depends on: traces, op_calls_healed
-- One row per host cpu_op call of a registered rank trace, with what op_breakdown and
-- module_breakdown sum (through the table op_calls, sql/materialized/op_calls.sql). Each row
-- depends on its trace alone, so the ingest task that parses a trace computes them
-- (pipeline/ops/calls.py, the one implementation of these rules) and writes them as the trace's
-- op_calls partition; a trace without a partition of the current formulas has its rows in
-- op_calls_healed instead, and those win.
-- * step: the ProfilerStep whose host window [ts, ts + dur) holds the call's start (NULL outside
--   every step), the rule gpu_step_windows uses to place a kernel by its launch;
-- * self_ns: its duration less its direct children's (any host event kind), at least 0;
-- * device_ns, device_events: the GPU events (kernels, copies, memsets) it launched itself
--   (op_launches.op_id: the innermost cpu_op around the launch);
-- * flops, dtype: its formula's FLOPs per call and compute dtype (docs/flops.md), NULL where the
--   op's name has no formula or its shapes do not fit it;
-- * counted_flops, counted_bytes: its FLOPs and bytes counted once: 0 where a descendant does work
--   (FLOPs > 0) and, for bytes, also where an ancestor is the counted unit of work (a call doing
--   work with no working descendant); NULL where the op has no formula;
-- * phase: backward under an `autograd::engine::evaluate_function:` call, optimizer under an
--   `Optimizer.` annotation (the outermost such ancestor-or-self decides), else forward;
--   module: the call's module path, for a call with none the module of the forward op its
--   kernels are linked to (op_launches.module);
-- * on_timeline: whether the call is on the timeline the breakdown measures: every thread of a
--   GPU rank (its time is its kernels'), the main thread of a CPU-only rank (the thread holding
--   the most ProfilerSteps, which plays the device, METHODOLOGY), or every thread of a CPU rank
--   without steps.
-- Parquet is the source of truth; only files registered in `traces` are shown. hive_partitioning
-- is off because every key column is stored in the file itself.
CREATE OR REPLACE VIEW op_calls_raw AS
WITH stored AS (
    SELECT *
    FROM read_parquet('parquet/op_calls/**/*.parquet', union_by_name = true, hive_partitioning = false)
    WHERE content_hash IN (SELECT content_hash FROM traces)
        AND content_hash NOT IN (SELECT content_hash FROM op_calls_healed)
)
SELECT
    study, run_id, rank, content_hash, gpu_rank, on_timeline, step, op_id, name, module, phase,
    self_ns, device_ns, device_events, flops, counted_flops, counted_bytes, dtype, formulas_version
FROM stored
UNION ALL
SELECT
    study, run_id, rank, content_hash, gpu_rank, on_timeline, step, op_id, name, module, phase,
    self_ns, device_ns, device_events, flops, counted_flops, counted_bytes, dtype, formulas_version
FROM op_calls_healed
WHERE content_hash IN (SELECT content_hash FROM traces);
