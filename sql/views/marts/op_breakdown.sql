-- depends on: op_rates
-- Per run, step, rank, op and module path: the time of the op's own work, its FLOPs and bytes
-- (counted once, docs/flops.md), the rates it reached and the roofline bound of the rank's device
-- (how each is found: op_rates).
CREATE OR REPLACE VIEW op_breakdown AS
SELECT
    study, run_id, step, rank, op, module, calls, device_us, host_us, work_us, flops, bytes,
    achieved_tflops, achieved_gbps, intensity, bound_tflops, bound_frac
FROM op_rates
