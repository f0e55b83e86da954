-- depends on: events, gpu_events, traces, cpu_calls
-- Per CPU-only run (no device events) and cpu_op name: calls, summed inclusive duration over all
-- ranks (whole trace), and summed self time on the rank's main thread. Ops nest (`MmBackward0`
-- runs inside `autograd::engine::evaluate_function: MmBackward0`), so inclusive times count a
-- child again in each of its parents; self time counts each instant once, in the innermost op,
-- as the CPU rule's compute does (METHODOLOGY "Steps on a CPU-only trace").
-- Self time of a main-thread call = its duration less the time of its direct children (cpu_calls:
-- the calls one level down whose last call started one level up is it), clipped to the call; a
-- call whose children do not nest inside it counts at least 0. Ops off the main thread have no
-- call tree (self_ns NULL). A TABLE, refreshed after every ingest: top_kernels reads it instead
-- of the Parquet events, so it answers from any working directory.
CREATE OR REPLACE TABLE cpu_op_totals AS
WITH cpu_runs AS (
    -- the runs with traces but no device events; on GPU-only warehouses the join is empty and
    -- DuckDB skips the scan of the events
    SELECT DISTINCT t.study, t.run_id
    FROM traces AS t
    ANTI JOIN gpu_events AS g ON t.study = g.study AND t.run_id = g.run_id
),
inclusive AS (
    SELECT e.study, e.run_id, e.kind, e.name, count(*) AS calls, sum(e.dur_ns) AS total_ns
    FROM events AS e
    SEMI JOIN cpu_runs AS c ON e.study = c.study AND e.run_id = c.run_id
    WHERE e.kind = 'cpu_op' AND e.dur_ns > 0
    GROUP BY e.study, e.run_id, e.kind, e.name
),
child_time AS (
    -- each call's time inside its parent: the last call started one level up before it
    SELECT p.rank_key, p.call_order, sum(least(c.end_ns, p.end_ns) - c.start_ns) AS children_ns
    FROM cpu_calls AS c
    ASOF JOIN cpu_calls AS p
        ON c.rank_key = p.rank_key AND c.level - 1 = p.level AND c.call_order > p.call_order
    GROUP BY p.rank_key, p.call_order
),
self_time AS (
    SELECT
        c.study, c.run_id, c.kind, c.name,
        sum(greatest(c.end_ns - c.start_ns - coalesce(k.children_ns, 0), 0)) AS self_ns
    FROM cpu_calls AS c
    LEFT JOIN child_time AS k ON c.rank_key = k.rank_key AND c.call_order = k.call_order
    WHERE c.kind = 'cpu_op'
    GROUP BY c.study, c.run_id, c.kind, c.name
)
SELECT i.study, i.run_id, i.kind, i.name, i.calls, i.total_ns, s.self_ns
FROM inclusive AS i
LEFT JOIN self_time AS s ON i.study = s.study AND i.run_id = s.run_id AND i.kind = s.kind AND i.name = s.name;
