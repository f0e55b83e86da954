-- depends on: ops, op_launches, op_costs, steps, cpu_main_threads
-- One row per host cpu_op call of a rank trace, with what op_breakdown and module_breakdown sum:
-- * step: the ProfilerStep whose host window [ts, ts + dur) holds the call's start (NULL outside
--   every step), the rule gpu_step_windows uses to place a kernel by its launch;
-- * self_ns: its duration less its direct children's (any host event kind), at least 0;
-- * device_ns, device_events: the GPU events (kernels, copies, memsets) it launched itself
--   (op_launches.op_id: the innermost cpu_op around the launch);
-- * counted_flops, counted_bytes: its op_costs counted once (docs/flops.md): 0 where a descendant
--   does work (FLOPs > 0) and, for bytes, also where an ancestor is the counted unit of work;
--   NULL where the op has no formula;
-- * phase: backward under an `autograd::engine::evaluate_function:` call, optimizer under an
--   `Optimizer.` annotation, else forward; module: the call's module path, for a call with none
--   the module of the forward op its kernels are linked to (op_launches.module);
-- * on_timeline: whether the call is on the timeline the breakdown measures: every thread of a
--   GPU rank (its time is its kernels'), the main thread of a CPU-only rank (which plays the
--   device, METHODOLOGY), or every thread of a CPU rank without one.
-- A TABLE, refreshed by the warehouse after ingest (op_costs is filled before): the public views
-- over it answer from any working directory, and the tree walks run once per ingest.
CREATE OR REPLACE TABLE op_calls AS
WITH RECURSIVE host AS (
    SELECT study, run_id, rank, op_id, parent_id, kind, name, module, ts_unix_ns, dur_ns, pid, tid,
        input_dims, input_types, concrete_inputs
    FROM ops
),
costed AS (
    SELECT h.*, c.flops, c.bytes, c.dtype
    FROM host AS h
    LEFT JOIN op_costs AS c
        ON h.kind = 'cpu_op' AND c.name = h.name
        AND c.input_dims IS NOT DISTINCT FROM h.input_dims
        AND c.input_types IS NOT DISTINCT FROM h.input_types
        AND c.concrete_inputs IS NOT DISTINCT FROM h.concrete_inputs
),
above_work(study, run_id, rank, op_id) AS (
    -- every ancestor of a call that does work
    SELECT study, run_id, rank, parent_id FROM costed WHERE flops > 0 AND parent_id IS NOT NULL
    UNION
    SELECT h.study, h.run_id, h.rank, h.parent_id
    FROM host AS h
    JOIN above_work AS a ON h.study = a.study AND h.run_id = a.run_id AND h.rank = a.rank AND h.op_id = a.op_id
    WHERE h.parent_id IS NOT NULL
),
inside_unit(study, run_id, rank, op_id) AS (
    -- every descendant of a counted unit of work (a call doing work with no working descendant)
    SELECT h.study, h.run_id, h.rank, h.op_id
    FROM host AS h
    JOIN costed AS u
        ON h.study = u.study AND h.run_id = u.run_id AND h.rank = u.rank AND h.parent_id = u.op_id
    ANTI JOIN above_work AS a
        ON u.study = a.study AND u.run_id = a.run_id AND u.rank = a.rank AND u.op_id = a.op_id
    WHERE u.flops > 0
    UNION
    SELECT h.study, h.run_id, h.rank, h.op_id
    FROM host AS h
    JOIN inside_unit AS i ON h.study = i.study AND h.run_id = i.run_id AND h.rank = i.rank AND h.parent_id = i.op_id
),
phased(study, run_id, rank, op_id, phase) AS (
    SELECT study, run_id, rank, op_id,
        CASE
            WHEN starts_with(name, 'autograd::engine::evaluate_function:') THEN 'backward'
            WHEN starts_with(name, 'Optimizer.') THEN 'optimizer'
            ELSE 'forward'
        END
    FROM host WHERE parent_id IS NULL
    UNION ALL
    SELECT h.study, h.run_id, h.rank, h.op_id,
        CASE
            WHEN p.phase <> 'forward' THEN p.phase
            WHEN starts_with(h.name, 'autograd::engine::evaluate_function:') THEN 'backward'
            WHEN starts_with(h.name, 'Optimizer.') THEN 'optimizer'
            ELSE 'forward'
        END
    FROM host AS h
    JOIN phased AS p ON h.study = p.study AND h.run_id = p.run_id AND h.rank = p.rank AND h.parent_id = p.op_id
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
    WHERE c.kind = 'cpu_op'
)
SELECT
    p.study, p.run_id, p.rank,
    g.rank IS NOT NULL AS gpu_rank,
    g.rank IS NOT NULL OR m.tid IS NULL OR (p.pid = m.pid AND p.tid = m.tid) AS on_timeline,
    CASE WHEN p.ts_unix_ns < p.step_start_ns + p.step_dur_ns THEN p.step END AS step,
    p.op_id, p.name,
    coalesce(p.module, l.launch_module) AS module,
    ph.phase,
    greatest(p.dur_ns - coalesce(k.children_ns, 0), 0) AS self_ns,
    coalesce(l.device_ns, 0) AS device_ns,
    coalesce(l.device_events, 0) AS device_events,
    p.flops,
    CASE WHEN p.flops IS NULL THEN NULL WHEN a.op_id IS NOT NULL THEN 0 ELSE p.flops END AS counted_flops,
    CASE
        WHEN p.flops IS NULL THEN NULL
        WHEN a.op_id IS NOT NULL OR i.op_id IS NOT NULL THEN 0
        ELSE p.bytes
    END AS counted_bytes,
    p.dtype
FROM placed AS p
LEFT JOIN (SELECT DISTINCT * FROM above_work) AS a
    ON p.study = a.study AND p.run_id = a.run_id AND p.rank = a.rank AND p.op_id = a.op_id
LEFT JOIN (SELECT DISTINCT * FROM inside_unit) AS i
    ON p.study = i.study AND p.run_id = i.run_id AND p.rank = i.rank AND p.op_id = i.op_id
LEFT JOIN phased AS ph ON p.study = ph.study AND p.run_id = ph.run_id AND p.rank = ph.rank AND p.op_id = ph.op_id
LEFT JOIN children AS k ON p.study = k.study AND p.run_id = k.run_id AND p.rank = k.rank AND p.op_id = k.op_id
LEFT JOIN launched AS l ON p.study = l.study AND p.run_id = l.run_id AND p.rank = l.rank AND p.op_id = l.op_id
LEFT JOIN gpu_ranks AS g ON p.study = g.study AND p.run_id = g.run_id AND p.rank = g.rank
LEFT JOIN cpu_main_threads AS m ON p.study = m.study AND p.run_id = m.run_id AND p.rank = m.rank
