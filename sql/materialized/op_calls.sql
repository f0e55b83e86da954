-- depends on: ops, op_launches, op_costs, op_tree, steps, cpu_main_threads
-- One row per host cpu_op call of a rank trace, with what op_breakdown and module_breakdown sum:
-- * step: the ProfilerStep whose host window [ts, ts + dur) holds the call's start (NULL outside
--   every step), the rule gpu_step_windows uses to place a kernel by its launch;
-- * self_ns: its duration less its direct children's (any host event kind), at least 0;
-- * device_ns, device_events: the GPU events (kernels, copies, memsets) it launched itself
--   (op_launches.op_id: the innermost cpu_op around the launch);
-- * counted_flops, counted_bytes: its op_costs counted once (docs/flops.md): 0 where a descendant
--   does work (FLOPs > 0) and, for bytes, also where an ancestor is the counted unit of work;
--   NULL where the op has no formula (op_tree: above_work, inside_unit);
-- * phase: backward under an `autograd::engine::evaluate_function:` call, optimizer under an
--   `Optimizer.` annotation, else forward (op_tree); module: the call's module path, for a call with none
--   the module of the forward op its kernels are linked to (op_launches.module);
-- * on_timeline: whether the call is on the timeline the breakdown measures: every thread of a
--   GPU rank (its time is its kernels'), the main thread of a CPU-only rank (which plays the
--   device, METHODOLOGY), or every thread of a CPU rank without one.
-- A TABLE, refreshed by the warehouse after ingest (op_costs and op_tree are filled before: the
-- tree walks run once per trace, in Python): the public views over it answer from any working
-- directory.
CREATE OR REPLACE TABLE op_calls AS
WITH host AS (
    SELECT study, run_id, rank, content_hash, op_id, parent_id, kind, name, module, ts_unix_ns, dur_ns,
        pid, tid, input_dims, input_types, concrete_inputs
    FROM ops
),
costed AS (
    SELECT h.*, c.flops, c.bytes, c.dtype
    FROM host AS h
    LEFT JOIN op_costs AS c
        ON c.name = h.name
        AND c.input_dims IS NOT DISTINCT FROM h.input_dims
        AND c.input_types IS NOT DISTINCT FROM h.input_types
        AND c.concrete_inputs IS NOT DISTINCT FROM h.concrete_inputs
    WHERE h.kind = 'cpu_op'
),
children AS (
    SELECT study, run_id, rank, parent_id AS op_id, sum(dur_ns) AS children_ns
    FROM host WHERE parent_id IS NOT NULL
    GROUP BY study, run_id, rank, parent_id
),
launched AS (
    SELECT study, run_id, rank, op_id, sum(dur_ns) AS device_ns, count(*) AS device_events,
        any_value(module) AS launch_module
    FROM op_launches WHERE op_id IS NOT NULL
    GROUP BY study, run_id, rank, op_id
),
gpu_ranks AS (
    SELECT DISTINCT study, run_id, rank FROM op_launches
),
placed AS (
    SELECT c.*, s.step, s.ts_unix_ns AS step_start_ns, s.dur_ns AS step_dur_ns
    FROM costed AS c
    ASOF LEFT JOIN steps AS s
        ON c.study = s.study AND c.run_id = s.run_id AND c.rank = s.rank AND c.ts_unix_ns >= s.ts_unix_ns
)
SELECT
    p.study, p.run_id, p.rank,
    g.rank IS NOT NULL AS gpu_rank,
    g.rank IS NOT NULL OR m.tid IS NULL OR (p.pid = m.pid AND p.tid = m.tid) AS on_timeline,
    CASE WHEN p.ts_unix_ns < p.step_start_ns + p.step_dur_ns THEN p.step END AS step,
    p.op_id, p.name,
    coalesce(p.module, l.launch_module) AS module,
    t.phase,
    greatest(p.dur_ns - coalesce(k.children_ns, 0), 0) AS self_ns,
    coalesce(l.device_ns, 0) AS device_ns,
    coalesce(l.device_events, 0) AS device_events,
    p.flops,
    CASE WHEN p.flops IS NULL THEN NULL WHEN t.above_work THEN 0 ELSE p.flops END AS counted_flops,
    CASE WHEN p.flops IS NULL THEN NULL WHEN t.above_work OR t.inside_unit THEN 0 ELSE p.bytes END AS counted_bytes,
    p.dtype
FROM placed AS p
LEFT JOIN op_tree AS t ON p.content_hash = t.content_hash AND p.op_id = t.op_id
LEFT JOIN children AS k ON p.study = k.study AND p.run_id = k.run_id AND p.rank = k.rank AND p.op_id = k.op_id
LEFT JOIN launched AS l ON p.study = l.study AND p.run_id = l.run_id AND p.rank = l.rank AND p.op_id = l.op_id
LEFT JOIN gpu_ranks AS g ON p.study = g.study AND p.run_id = g.run_id AND p.rank = g.rank
LEFT JOIN cpu_main_threads AS m ON p.study = m.study AND p.run_id = m.run_id AND p.rank = m.rank
