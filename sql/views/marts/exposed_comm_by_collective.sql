-- depends on: comm_exposure, step_breakdown
-- Exposed communication per run, op, parallel dimension and phase, per step, two ways:
-- * *_per_step: the mean over every rank's step windows (sums over all ranks and steps divided
--   by the run's number of rank step windows); exposed_frac = the sum of exposed over the sum of
--   windows, so a run's exposed_frac sum to scale_points.exposed_comm_frac;
-- * slowest_rank_*: the mean over steps of the slowest rank's step (longest window, ties: the
--   lowest rank), the step a synchronous job moves at.
-- comm_us counts each interval's time in the window (intervals in flight at once each count).
CREATE OR REPLACE VIEW exposed_comm_by_collective AS
WITH run_windows AS (
    SELECT study, run_id, count(*) AS n_windows, sum(window_us) AS window_us
    FROM step_breakdown
    GROUP BY study, run_id
),
slowest AS (
    SELECT study, run_id, rank, step
    FROM (
        SELECT
            study, run_id, rank, step,
            row_number() OVER (PARTITION BY study, run_id, step ORDER BY window_us DESC, rank) AS pick
        FROM step_breakdown
    ) AS ranked
    WHERE pick = 1
),
run_steps AS (
    SELECT study, run_id, count(*) AS n_steps FROM slowest GROUP BY study, run_id
),
everywhere AS (
    SELECT
        study, run_id, op, parallel_dim, phase,
        count(*) AS calls,
        sum(bytes) AS bytes,
        sum(in_window_us) AS comm_us,
        sum(exposed_us) AS exposed_us,
        sum(exposed_wait_us) AS exposed_wait_us,
        sum(exposed_transfer_us) AS exposed_transfer_us
    FROM comm_exposure
    GROUP BY study, run_id, op, parallel_dim, phase
),
on_slowest AS (
    SELECT
        c.study, c.run_id, c.op, c.parallel_dim, c.phase,
        sum(c.in_window_us) AS comm_us,
        sum(c.exposed_us) AS exposed_us,
        sum(c.exposed_wait_us) AS exposed_wait_us,
        sum(c.exposed_transfer_us) AS exposed_transfer_us
    FROM comm_exposure AS c
    SEMI JOIN slowest AS s
        ON c.study = s.study AND c.run_id = s.run_id AND c.rank = s.rank AND c.step IS NOT DISTINCT FROM s.step
    GROUP BY c.study, c.run_id, c.op, c.parallel_dim, c.phase
)
SELECT
    e.study, e.run_id, e.op, e.parallel_dim, e.phase,
    e.calls / w.n_windows AS calls_per_step,
    e.bytes / w.n_windows AS bytes_per_step,
    e.comm_us / w.n_windows AS comm_us_per_step,
    e.exposed_us / w.n_windows AS exposed_us_per_step,
    e.exposed_wait_us / w.n_windows AS exposed_wait_us_per_step,
    e.exposed_transfer_us / w.n_windows AS exposed_transfer_us_per_step,
    e.exposed_us / w.window_us AS exposed_frac,
    coalesce(s.comm_us, 0) / r.n_steps AS slowest_rank_comm_us,
    coalesce(s.exposed_us, 0) / r.n_steps AS slowest_rank_exposed_us,
    s.exposed_wait_us / r.n_steps AS slowest_rank_exposed_wait_us,
    s.exposed_transfer_us / r.n_steps AS slowest_rank_exposed_transfer_us,
    w.n_windows, r.n_steps
FROM everywhere AS e
JOIN run_windows AS w ON e.study = w.study AND e.run_id = w.run_id
JOIN run_steps AS r ON e.study = r.study AND e.run_id = r.run_id
LEFT JOIN on_slowest AS s
    ON e.study = s.study AND e.run_id = s.run_id AND e.op IS NOT DISTINCT FROM s.op
    AND e.parallel_dim = s.parallel_dim AND e.phase IS NOT DISTINCT FROM s.phase;
