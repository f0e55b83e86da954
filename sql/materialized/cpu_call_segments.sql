-- depends on: cpu_calls
-- The elementary segments of every CPU-only rank's call tree (between consecutive call
-- boundaries), with the state once every boundary at its start is applied: depth (calls open)
-- and last_started (the highest call_order started so far); study and run_id name its run.
-- A TABLE, refreshed by the warehouse after ingest (see cpu_calls).
CREATE OR REPLACE TABLE cpu_call_segments AS
WITH points AS (
    SELECT rank_key, start_ns AS t, 1 AS delta, call_order FROM cpu_calls
    UNION ALL
    SELECT rank_key, end_ns, -1, NULL FROM cpu_calls
),
states AS (
    SELECT
        rank_key, t,
        -- the default frame takes every point at t (its peers) into the state
        CAST(sum(delta) OVER (PARTITION BY rank_key ORDER BY t) AS BIGINT) AS depth,
        max(call_order) OVER (PARTITION BY rank_key ORDER BY t) AS last_started,
        row_number() OVER (PARTITION BY rank_key, t) AS nth_at_t
    FROM points
),
segments AS (
    SELECT
        rank_key, t AS start_ns,
        lead(t) OVER (PARTITION BY rank_key ORDER BY t) AS end_ns,
        depth, last_started
    FROM states
    WHERE nth_at_t = 1
)
SELECT k.study, k.run_id, s.rank_key, s.start_ns, s.end_ns, s.depth, s.last_started
FROM segments AS s
JOIN (SELECT DISTINCT study, run_id, rank_key FROM cpu_calls) AS k ON s.rank_key = k.rank_key
WHERE s.end_ns IS NOT NULL AND s.depth > 0;
