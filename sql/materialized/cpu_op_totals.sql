-- depends on: events, gpu_events
-- Per CPU-only run (no device events) and cpu_op name: calls and summed duration over all
-- ranks, whole trace. A TABLE, refreshed after every ingest: top_kernels reads it instead of the
-- Parquet events, so it answers from any working directory.
CREATE OR REPLACE TABLE cpu_op_totals AS
WITH gpu_runs AS (
    SELECT DISTINCT study, run_id FROM gpu_events
)
SELECT e.study, e.run_id, e.kind, e.name, count(*) AS calls, sum(e.dur_ns) AS total_ns
FROM events AS e
ANTI JOIN gpu_runs AS g ON e.study = g.study AND e.run_id = g.run_id
WHERE e.kind = 'cpu_op' AND e.dur_ns > 0
GROUP BY e.study, e.run_id, e.kind, e.name;
