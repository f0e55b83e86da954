-- depends on: events, gpu_events, traces
-- Per CPU-only run (no device events) and cpu_op name: calls and summed duration over all
-- ranks, whole trace. A TABLE, refreshed after every ingest: top_kernels reads it instead of the
-- Parquet events, so it answers from any working directory.
CREATE OR REPLACE TABLE cpu_op_totals AS
WITH cpu_runs AS (
    -- the runs with traces but no device events; on GPU-only warehouses the join is empty and
    -- DuckDB skips the scan of the events
    SELECT DISTINCT t.study, t.run_id
    FROM traces AS t
    ANTI JOIN gpu_events AS g ON t.study = g.study AND t.run_id = g.run_id
)
SELECT e.study, e.run_id, e.kind, e.name, count(*) AS calls, sum(e.dur_ns) AS total_ns
FROM events AS e
SEMI JOIN cpu_runs AS c ON e.study = c.study AND e.run_id = c.run_id
WHERE e.kind = 'cpu_op' AND e.dur_ns > 0
GROUP BY e.study, e.run_id, e.kind, e.name;
