-- depends on: events, gpu_events
-- The runtime call that launched each GPU event, one row per rank and (correlation, launch):
-- the runtime event with the GPU event's correlation that starts at its launch
-- (events.launch_ts_unix_ns, the earliest runtime call with that correlation), and its duration.
-- A TABLE, refreshed after every ingest: launch_stats reads it instead of the Parquet events, so
-- it answers from any working directory.
CREATE OR REPLACE TABLE launch_calls AS
WITH launches AS (
    SELECT DISTINCT study, run_id, rank, correlation, launch_ns
    FROM gpu_events
    WHERE launch_ns IS NOT NULL
)
SELECT l.study, l.run_id, l.rank, l.correlation, l.launch_ns, min(e.dur_ns) AS call_ns
FROM launches AS l
JOIN events AS e
    ON e.study = l.study AND e.run_id = l.run_id AND e.rank = l.rank
    AND e.correlation = l.correlation AND e.ts_unix_ns = l.launch_ns
WHERE e.kind = 'runtime'
GROUP BY l.study, l.run_id, l.rank, l.correlation, l.launch_ns;
