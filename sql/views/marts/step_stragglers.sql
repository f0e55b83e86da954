-- depends on: step_breakdown
-- Per run and step: the slowest rank (ties: the lowest rank), its window, and its lead over the
-- median rank.
CREATE OR REPLACE VIEW step_stragglers AS
WITH per_step AS (
    SELECT
        study, run_id, step,
        count(*) AS n_ranks,
        arg_min(rank, (-window_us, rank)) AS slowest_rank,
        max(window_us) AS slowest_us,
        median(window_us) AS median_us
    FROM step_breakdown
    GROUP BY study, run_id, step
)
SELECT
    study, run_id, step, n_ranks, slowest_rank, slowest_us, median_us,
    slowest_us - median_us AS lead_us,
    CASE WHEN median_us > 0 THEN 100.0 * (slowest_us - median_us) / median_us END AS lead_pct
FROM per_step;
