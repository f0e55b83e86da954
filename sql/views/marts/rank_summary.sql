-- depends on: window_breakdown
-- Whole-trace totals per rank: first to last device event (GPU) or the main thread's first
-- start to last end (CPU), all events, no step filter. The HTA cross-check compares these.
CREATE OR REPLACE VIEW rank_summary AS
WITH trace_windows AS (
    SELECT * FROM window_breakdown WHERE scope = 'trace'
)
SELECT
    study, run_id, rank,
    start_ns AS span_start_unix_ns,
    window_ns / 1000.0 AS span_us,
    busy_ns / 1000.0 AS busy_us,
    compute_ns / 1000.0 AS compute_us,
    comm_ns / 1000.0 AS comm_us,
    exposed_comm_ns / 1000.0 AS exposed_comm_us,
    overlapped_comm_ns / 1000.0 AS overlapped_comm_us,
    other_ns / 1000.0 AS other_us,
    idle_ns / 1000.0 AS idle_us,
    CASE WHEN comm_ns > 0 THEN 100.0 * overlapped_comm_ns / comm_ns END AS overlap_pct,
    rule
FROM trace_windows;
