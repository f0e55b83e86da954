-- depends on: runs, run_step_times, run_wait_shares, run_compute_efficiency, step_energy
-- One row per run (a scale point): step time, throughput, MFU, scaling, breakdown shares,
-- power and energy (METHODOLOGY "Scale-point figures").
-- Step time and shares come from run_step_times (the median over steps of the slowest rank's
-- window; sums over all ranks and steps divided by the summed windows). Scaling efficiency is
-- against the study's smallest world size and marginal throughput against the next smaller
-- world size; where several runs share a world size, that size counts with its best tokens/s.
-- strategy_scaling_efficiency applies the same rule within the run's strategy (its own smallest
-- world size as the baseline), for readers comparing a strategy with itself (the report's headline).
-- Why the step waits (run_wait_shares): exposed wait / transfer and idle-cause shares of the same
-- summed windows, and the op and parallel dimension with the most exposed communication.
-- How close compute runs to the roofline (run_compute_efficiency): the time-weighted fraction of
-- their bound that the ops reach, the share of that time below half the bound, and the share of
-- op time that has a bound at all.
CREATE OR REPLACE VIEW scale_points AS
WITH device_sources AS (
    SELECT
        study, run_id, host, device, source,
        row_number() OVER (
            PARTITION BY study, run_id, host, device
            ORDER BY count(*) FILTER (WHERE energy_method = 'counter') DESC, count(energy_j) DESC, source
        ) AS pick
    FROM step_energy
    GROUP BY study, run_id, host, device, source
),
step_totals AS (
    SELECT
        e.study, e.run_id, e.step,
        max(e.window_us) AS window_us,
        sum(e.energy_j) AS energy_j,
        count(*) AS n_devices,
        count(*) = count(e.energy_j) AS complete,
        bool_and(e.energy_method = 'counter') AS all_counter
    FROM step_energy AS e
    SEMI JOIN device_sources AS d
        ON e.study = d.study AND e.run_id = d.run_id AND e.host = d.host
        AND e.device = d.device AND e.source = d.source AND d.pick = 1
    GROUP BY e.study, e.run_id, e.step
),
energy AS (
    SELECT
        study, run_id,
        avg(energy_j) AS energy_per_step_j,
        sum(energy_j) / (sum(window_us) / 1e6) / max(n_devices) AS avg_power_w_per_device,
        max(n_devices) AS n_power_devices,
        CASE WHEN bool_and(all_counter) THEN 'counter' WHEN NOT bool_or(all_counter) THEN 'trapezoid'
            ELSE 'mixed' END AS energy_method
    FROM step_totals
    WHERE complete AND window_us > 0
    GROUP BY study, run_id
),
throughput AS (
    SELECT
        r.study, r.run_id, r.strategy, r.world_size, r.tokens_per_step, r.flops_per_token, r.peak_flops,
        t.step_time_us, t.n_steps,
        r.tokens_per_step / (t.step_time_us / 1e6) AS tokens_per_s
    FROM runs AS r
    JOIN run_step_times AS t ON r.study = t.study AND r.run_id = t.run_id
    WHERE t.step_time_us > 0
),
per_size AS (
    SELECT study, world_size, max(tokens_per_s) AS best_tokens_per_s
    FROM throughput
    WHERE world_size IS NOT NULL
    GROUP BY study, world_size
),
scaled AS (
    SELECT
        study, world_size,
        first_value(world_size) OVER w AS base_world_size,
        first_value(best_tokens_per_s) OVER w AS base_tokens_per_s,
        lag(world_size) OVER w AS prev_world_size,
        lag(best_tokens_per_s) OVER w AS prev_tokens_per_s
    FROM per_size
    WINDOW w AS (PARTITION BY study ORDER BY world_size)
),
strategy_sizes AS (
    -- the same baseline rule within each strategy: its smallest world size, at its best tokens/s
    SELECT study, strategy, world_size, max(tokens_per_s) AS best_tokens_per_s
    FROM throughput
    WHERE world_size IS NOT NULL
    GROUP BY study, strategy, world_size
),
strategy_scaled AS (
    SELECT
        study, strategy, world_size,
        first_value(world_size) OVER w AS base_world_size,
        first_value(best_tokens_per_s) OVER w AS base_tokens_per_s
    FROM strategy_sizes
    WINDOW w AS (PARTITION BY study, strategy ORDER BY world_size)
)
SELECT
    p.study, p.run_id, p.world_size, p.n_steps,
    p.step_time_us,
    p.tokens_per_s,
    p.tokens_per_s / p.world_size AS tokens_per_s_per_device,
    p.tokens_per_s / p.world_size * p.flops_per_token / p.peak_flops AS mfu,
    (p.tokens_per_s / s.base_tokens_per_s) / (1.0 * p.world_size / s.base_world_size) AS scaling_efficiency,
    (p.tokens_per_s - s.prev_tokens_per_s) / (p.world_size - s.prev_world_size)
        AS marginal_tokens_per_s_per_device,
    sh.compute_frac, sh.exposed_comm_frac, sh.other_frac, sh.idle_frac,
    e.avg_power_w_per_device,
    e.energy_per_step_j,
    p.tokens_per_step / e.energy_per_step_j AS tokens_per_j,
    e.energy_method,
    ws.exposed_wait_frac, ws.exposed_transfer_frac,
    ws.idle_host_wait_frac, ws.idle_device_wait_frac, ws.idle_unknown_frac,
    ws.dominant_exposed_op, ws.dominant_exposed_dim,
    (p.tokens_per_s / ss.base_tokens_per_s) / (1.0 * p.world_size / ss.base_world_size)
        AS strategy_scaling_efficiency,
    ss.base_world_size AS strategy_base_world_size,
    ce.compute_efficiency, ce.compute_below_half_bound_frac,
    coalesce(ce.compute_bounded_frac, 0.0) AS compute_bounded_frac
FROM throughput AS p
LEFT JOIN scaled AS s ON p.study = s.study AND p.world_size = s.world_size
LEFT JOIN strategy_scaled AS ss
    ON p.study = ss.study AND p.strategy IS NOT DISTINCT FROM ss.strategy AND p.world_size = ss.world_size
LEFT JOIN run_step_times AS sh ON p.study = sh.study AND p.run_id = sh.run_id
LEFT JOIN energy AS e ON p.study = e.study AND p.run_id = e.run_id
LEFT JOIN run_wait_shares AS ws ON p.study = ws.study AND p.run_id = ws.run_id
LEFT JOIN run_compute_efficiency AS ce ON p.study = ce.study AND p.run_id = ce.run_id;
