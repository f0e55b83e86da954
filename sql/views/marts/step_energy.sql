-- depends on: gpu_events, power_samples, traces, window_breakdown
-- Energy per step and device, from power samples joined to the run's step windows on the
-- absolute clock. A run's step window spans every rank's window of that step. Energy is the
-- cumulative counter's difference where every sample covering the window has one (method
-- 'counter'), else the trapezoid integral of power (method 'trapezoid'); both interpolate
-- linearly at the window edges. A window not fully covered by samples gets NULL energy.
-- Only the run's own devices count: samplers log every GPU of a host, so when the run's GPU
-- events name their device (args.device), samples of other devices (and, where both hosts are
-- known, other hosts) are left out; a run whose devices are unknown keeps every sample.
-- Grain: one row per (study, run_id, step, host, device, source).
CREATE OR REPLACE VIEW step_energy AS
WITH run_devices AS (
    SELECT DISTINCT g.study, g.run_id, t.host, g.device
    FROM gpu_events AS g
    LEFT JOIN traces AS t ON g.study = t.study AND g.run_id = t.run_id AND g.rank = t.rank
    WHERE g.device IS NOT NULL
),
run_samples AS (
    SELECT p.*
    FROM power_samples AS p
    WHERE NOT EXISTS (SELECT 1 FROM run_devices AS d WHERE d.study = p.study AND d.run_id = p.run_id)
        OR EXISTS (
            SELECT 1 FROM run_devices AS d
            WHERE d.study = p.study AND d.run_id = p.run_id AND d.device = p.device
                AND (d.host IS NULL OR p.host IS NULL OR d.host = p.host)
        )
),
run_steps AS (
    SELECT study, run_id, step, min(start_ns) AS start_ns, max(start_ns + window_ns) AS end_ns
    FROM window_breakdown
    WHERE scope = 'step'
    GROUP BY study, run_id, step
),
pieces AS (
    SELECT
        study, run_id, host, device, source,
        ts_unix_ns AS t0, power_w AS p0, energy_counter_j AS e0,
        lead(ts_unix_ns) OVER w AS t1,
        lead(power_w) OVER w AS p1,
        lead(energy_counter_j) OVER w AS e1
    FROM run_samples
    WINDOW w AS (PARTITION BY study, run_id, host, device, source ORDER BY ts_unix_ns)
),
clipped AS (
    SELECT
        s.study, s.run_id, s.step, s.start_ns, s.end_ns, p.host, p.device, p.source,
        greatest(p.t0, s.start_ns) AS x0,
        least(p.t1, s.end_ns) AS x1,
        p.t0, p.t1, p.p0, p.p1, p.e0, p.e1
    FROM run_steps AS s
    JOIN pieces AS p
        ON s.study = p.study AND s.run_id = p.run_id
        AND p.t0 < s.end_ns AND p.t1 > s.start_ns
    WHERE p.t1 IS NOT NULL AND p.t1 > p.t0
),
integrated AS (
    SELECT
        *,
        (x1 - x0) / 1e9 * (
            (p0 + (p1 - p0) * (x0 - t0) / (t1 - t0)) + (p0 + (p1 - p0) * (x1 - t0) / (t1 - t0))
        ) / 2.0 AS trapezoid_j,
        (e1 - e0) * (x1 - x0) / (t1 - t0) AS counter_j
    FROM clipped
),
per_device AS (
    SELECT
        study, run_id, step, host, device, source,
        min(start_ns) AS start_ns,
        min(end_ns) - min(start_ns) AS window_ns,
        sum(x1 - x0) AS covered_ns,
        count(*) = count(counter_j) AS has_counter,
        sum(counter_j) AS counter_j,
        sum(trapezoid_j) AS trapezoid_j
    FROM integrated
    GROUP BY study, run_id, step, host, device, source
)
SELECT
    study, run_id, step, host, device, source,
    start_ns AS window_start_unix_ns,
    window_ns / 1000.0 AS window_us,
    CASE WHEN covered_ns < window_ns THEN NULL WHEN has_counter THEN counter_j ELSE trapezoid_j END
        AS energy_j,
    CASE WHEN covered_ns < window_ns THEN NULL WHEN has_counter THEN 'counter' ELSE 'trapezoid' END
        AS energy_method,
    CASE WHEN covered_ns >= window_ns AND window_ns > 0
        THEN (CASE WHEN has_counter THEN counter_j ELSE trapezoid_j END) / (window_ns / 1e9)
    END AS avg_power_w
FROM per_device;
