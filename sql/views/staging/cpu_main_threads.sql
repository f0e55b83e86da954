-- depends on: gpu_events, steps
-- CPU-only ranks (no GPU events) and their main thread: the (pid, tid) holding the most
-- ProfilerStep# annotations. A CPU rank without ProfilerStep has no main thread, so no rows.
CREATE OR REPLACE VIEW cpu_main_threads AS
WITH gpu_ranks AS (
    SELECT DISTINCT study, run_id, rank FROM gpu_events
),
step_threads AS (
    SELECT study, run_id, rank, pid, tid, count(*) AS n_steps
    FROM steps
    GROUP BY study, run_id, rank, pid, tid
),
ranked AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY study, run_id, rank ORDER BY n_steps DESC, pid, tid) AS pick
    FROM step_threads
)
SELECT r.study, r.run_id, r.rank, r.pid, r.tid
FROM ranked AS r
ANTI JOIN gpu_ranks AS g ON r.study = g.study AND r.run_id = g.run_id AND r.rank = g.rank
WHERE r.pick = 1;
