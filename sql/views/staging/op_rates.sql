-- depends on: op_calls, traces, device_peaks
-- Per run, step, rank, op and module path: the time of the op's own work (work_us), its FLOPs and
-- bytes (counted once, docs/flops.md), the rates it reached and the roofline bound of the rank's
-- device. op_breakdown shows its public columns; run_compute_efficiency rolls it up per run.
-- Time: on a GPU rank the device time of the kernels, copies and memsets the op launched itself
-- (summed: concurrent streams count each); on a CPU-only rank its host self time on the main
-- thread, which plays the device (calls on other threads are left out, as from compute_us). A group's
-- dtype (whose peak bounds it) is that of the call with the most FLOPs; the device is the
-- rank's (traces.device_name) matched to device_peaks; a CPU or an unknown device has no bound.
CREATE OR REPLACE VIEW op_rates AS
WITH grouped AS (
    SELECT
        study, run_id, step, rank, any_value(gpu_rank) AS gpu_rank, name AS op, module,
        count(*) AS calls,
        sum(device_ns) / 1e3 AS device_us,
        sum(self_ns) / 1e3 AS host_us,
        sum(counted_flops)::BIGINT AS flops,
        sum(counted_bytes)::BIGINT AS bytes,
        arg_max(dtype, coalesce(counted_flops, 0)) AS dtype
    FROM op_calls
    WHERE on_timeline
    GROUP BY study, run_id, step, rank, name, module
),
devices AS (
    SELECT t.study, t.run_id, t.rank, arg_min(p.device_key, p.match_order) AS device_key
    FROM traces AS t
    JOIN device_peaks AS p ON contains(lower(t.device_name), lower(p.device_key))
    GROUP BY t.study, t.run_id, t.rank
),
rated AS (
    SELECT
        g.*,
        CASE WHEN g.gpu_rank THEN g.device_us ELSE g.host_us END AS work_us,
        g.flops / nullif(g.bytes, 0) AS intensity,
        p.peak_flops, p.peak_bytes_per_s
    FROM grouped AS g
    LEFT JOIN devices AS d ON g.study = d.study AND g.run_id = d.run_id AND g.rank = d.rank
    LEFT JOIN device_peaks AS p ON p.device_key = d.device_key AND p.dtype = g.dtype
),
bounded AS (
    SELECT
        *,
        flops / nullif(work_us, 0) / 1e6 AS achieved_tflops,
        bytes / nullif(work_us, 0) / 1e3 AS achieved_gbps,
        CASE
            WHEN coalesce(flops, 0) = 0 OR peak_flops IS NULL THEN NULL  -- no FLOPs: no FLOP/s bound
            WHEN intensity IS NULL THEN peak_flops / 1e12
            ELSE least(peak_flops, intensity * peak_bytes_per_s) / 1e12
        END AS bound_tflops
    FROM rated
)
SELECT
    study, run_id, step, rank, op, module, gpu_rank, calls, device_us, host_us, work_us, flops, bytes,
    achieved_tflops, achieved_gbps, intensity, bound_tflops,
    achieved_tflops / nullif(bound_tflops, 0) AS bound_frac
FROM bounded
