-- depends on: op_calls
-- op_breakdown rolled up by module path and phase: per run, step, rank, module and phase
-- (forward, backward, optimizer), the time of the ops inside it, their FLOPs and bytes and the
-- rates reached. A backward op takes the module of the forward op its kernels are linked to.
-- Ops outside any module (module NULL) form one row per phase.
CREATE OR REPLACE VIEW module_breakdown AS
WITH grouped AS (
    SELECT
        study, run_id, step, rank, module, phase, any_value(gpu_rank) AS gpu_rank,
        count(*) AS calls,
        sum(device_ns) / 1e3 AS device_us,
        sum(self_ns) / 1e3 AS host_us,
        sum(counted_flops)::BIGINT AS flops,
        sum(counted_bytes)::BIGINT AS bytes
    FROM op_calls
    WHERE on_timeline
    GROUP BY study, run_id, step, rank, module, phase
)
SELECT
    study, run_id, step, rank, module, phase, calls, device_us, host_us,
    CASE WHEN gpu_rank THEN device_us ELSE host_us END AS work_us, flops, bytes,
    flops / nullif(CASE WHEN gpu_rank THEN device_us ELSE host_us END, 0) / 1e6 AS achieved_tflops,
    bytes / nullif(CASE WHEN gpu_rank THEN device_us ELSE host_us END, 0) / 1e3 AS achieved_gbps,
    flops / nullif(bytes, 0) AS intensity
FROM grouped
