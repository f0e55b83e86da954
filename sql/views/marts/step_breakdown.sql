-- depends on: window_breakdown
-- Where each step's time goes, per rank and step window (METHODOLOGY "Steps on a GPU trace",
-- "Steps on a CPU-only trace"). Grain: one row per (study, run_id, rank, step window).
CREATE OR REPLACE VIEW step_breakdown AS
WITH step_windows AS (
    SELECT * FROM window_breakdown WHERE scope = 'step'
)
SELECT
    study, run_id, rank, step,
    start_ns AS window_start_unix_ns,
    window_ns / 1000.0 AS window_us,
    compute_ns / 1000.0 AS compute_us,
    comm_ns / 1000.0 AS comm_us,
    exposed_comm_ns / 1000.0 AS exposed_comm_us,
    overlapped_comm_ns / 1000.0 AS overlapped_comm_us,
    other_ns / 1000.0 AS other_us,
    idle_ns / 1000.0 AS idle_us,
    busy_ns / 1000.0 AS busy_us,
    rule
FROM step_windows;
