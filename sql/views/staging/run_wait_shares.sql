-- depends on: comm_exposure, idle_causes, step_breakdown
-- Per run: the shares of the summed step windows (all ranks and steps, as run_step_times) that
-- are exposed waiting, exposed transfer and each idle cause, and the dominant exposed collective
-- (op and parallel dimension with the most exposed time, all phases; ties: by op, then dimension).
CREATE OR REPLACE VIEW run_wait_shares AS
WITH windows AS (
    SELECT study, run_id, sum(window_us) AS window_us
    FROM step_breakdown
    GROUP BY study, run_id
    HAVING sum(window_us) > 0
),
exposure AS (
    SELECT study, run_id, sum(exposed_wait_us) AS wait_us, sum(exposed_transfer_us) AS transfer_us
    FROM comm_exposure
    GROUP BY study, run_id
),
idle AS (
    SELECT
        study, run_id,
        sum(idle_host_wait_us) AS host_wait_us,
        sum(idle_device_wait_us) AS device_wait_us,
        sum(idle_unknown_us) AS unknown_us
    FROM idle_causes
    GROUP BY study, run_id
),
by_collective AS (
    SELECT study, run_id, op, parallel_dim, sum(exposed_us) AS exposed_us
    FROM comm_exposure
    GROUP BY study, run_id, op, parallel_dim
),
dominant AS (
    SELECT study, run_id, op, parallel_dim
    FROM (
        SELECT
            *,
            row_number() OVER (PARTITION BY study, run_id ORDER BY exposed_us DESC, op, parallel_dim) AS pick
        FROM by_collective
        WHERE exposed_us > 0
    ) AS ranked
    WHERE pick = 1
)
SELECT
    w.study, w.run_id,
    e.wait_us / w.window_us AS exposed_wait_frac,
    e.transfer_us / w.window_us AS exposed_transfer_frac,
    i.host_wait_us / w.window_us AS idle_host_wait_frac,
    i.device_wait_us / w.window_us AS idle_device_wait_frac,
    i.unknown_us / w.window_us AS idle_unknown_frac,
    d.op AS dominant_exposed_op,
    d.parallel_dim AS dominant_exposed_dim
FROM windows AS w
LEFT JOIN exposure AS e ON w.study = e.study AND w.run_id = e.run_id
LEFT JOIN idle AS i ON w.study = i.study AND w.run_id = i.run_id
LEFT JOIN dominant AS d ON w.study = d.study AND w.run_id = d.run_id;
