-- depends on: gpu_events, steps
-- Step windows on the device timeline of each GPU rank (METHODOLOGY "Steps on a GPU trace").
-- A GPU event belongs to the ProfilerStep whose half-open host window [ts, ts+dur) holds its
-- launch; window N = [first start of step-N events, first start of the next step with events),
-- the last one ends at the last end of its own events. Starts are made monotone (suffix
-- minimum) so windows always tile, even if a later step's work starts before an earlier one's.
-- A rank none of whose GPU events can be placed gets one window, step NULL, first to last event.
CREATE OR REPLACE VIEW gpu_step_windows AS
WITH placed AS (
    SELECT g.study, g.run_id, g.rank, s.step, g.start_ns, g.end_ns
    FROM gpu_events AS g
    ASOF JOIN steps AS s
        ON g.study = s.study AND g.run_id = s.run_id AND g.rank = s.rank
        AND g.launch_ns >= s.ts_unix_ns
    WHERE g.launch_ns < s.ts_unix_ns + s.dur_ns
),
step_extent AS (
    SELECT study, run_id, rank, step, min(start_ns) AS first_start_ns, max(end_ns) AS last_end_ns
    FROM placed
    GROUP BY study, run_id, rank, step
),
monotone AS (
    SELECT
        *,
        min(first_start_ns) OVER (
            PARTITION BY study, run_id, rank ORDER BY step DESC
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS start_ns
    FROM step_extent
),
tiled AS (
    SELECT
        study, run_id, rank, step, start_ns,
        coalesce(
            lead(start_ns) OVER (PARTITION BY study, run_id, rank ORDER BY step),
            greatest(last_end_ns, start_ns)
        ) AS end_ns
    FROM monotone
),
unplaced_ranks AS (
    SELECT g.study, g.run_id, g.rank, CAST(NULL AS BIGINT) AS step,
        min(g.start_ns) AS start_ns, max(g.end_ns) AS end_ns
    FROM gpu_events AS g
    ANTI JOIN (SELECT DISTINCT study, run_id, rank FROM step_extent) AS x
        ON g.study = x.study AND g.run_id = x.run_id AND g.rank = x.rank
    GROUP BY g.study, g.run_id, g.rank
)
SELECT study, run_id, rank, step, start_ns, end_ns FROM tiled
UNION ALL
SELECT study, run_id, rank, step, start_ns, end_ns FROM unplaced_ranks;
