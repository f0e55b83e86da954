-- depends on: step_breakdown
-- One row per run: its step time (METHODOLOGY "Scale-point figures": the median over steps of
-- the slowest rank's window; DuckDB's median is the mean of the two middle values for an even
-- count) and the breakdown's shares (sums over all ranks and steps divided by the summed
-- windows), so step_time_us x each share splits the step time exactly.
CREATE OR REPLACE VIEW run_step_times AS
WITH slowest AS (
    SELECT study, run_id, step, max(window_us) AS slowest_us
    FROM step_breakdown
    GROUP BY study, run_id, step
),
timed AS (
    SELECT study, run_id, median(slowest_us) AS step_time_us, count(*) AS n_steps
    FROM slowest
    GROUP BY study, run_id
),
shares AS (
    SELECT
        study, run_id,
        count(*) / count(DISTINCT rank) AS windows_per_rank,
        sum(compute_us) / sum(window_us) AS compute_frac,
        sum(exposed_comm_us) / sum(window_us) AS exposed_comm_frac,
        sum(other_us) / sum(window_us) AS other_frac,
        sum(idle_us) / sum(window_us) AS idle_frac
    FROM step_breakdown
    GROUP BY study, run_id
    HAVING sum(window_us) > 0
)
SELECT
    t.study, t.run_id, t.step_time_us, t.n_steps, s.windows_per_rank,
    s.compute_frac, s.exposed_comm_frac, s.other_frac, s.idle_frac
FROM timed AS t
LEFT JOIN shares AS s ON t.study = s.study AND t.run_id = s.run_id;
