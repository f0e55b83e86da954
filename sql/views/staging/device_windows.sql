-- depends on: cpu_main_threads, events, gpu_events, gpu_step_windows, steps
-- Every window the breakdown is measured over, per rank: step windows (scope 'step') and the
-- whole trace (scope 'trace'). GPU ranks use the device timeline; CPU-only ranks use the main
-- thread: a step window is the ProfilerStep# event itself, the whole trace the main thread's
-- first start to last end.
CREATE OR REPLACE VIEW device_windows AS
WITH gpu_trace AS (
    SELECT study, run_id, rank, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM gpu_events
    GROUP BY study, run_id, rank
),
cpu_steps AS (
    SELECT s.study, s.run_id, s.rank, s.step, s.ts_unix_ns AS start_ns, s.ts_unix_ns + s.dur_ns AS end_ns
    FROM steps AS s
    JOIN cpu_main_threads AS m
        ON s.study = m.study AND s.run_id = m.run_id AND s.rank = m.rank
        AND s.pid = m.pid AND s.tid = m.tid
    WHERE s.dur_ns >= 0
),
cpu_trace AS (
    SELECT e.study, e.run_id, e.rank, min(e.ts_unix_ns) AS start_ns, max(e.ts_unix_ns + e.dur_ns) AS end_ns
    FROM events AS e
    JOIN cpu_main_threads AS m
        ON e.study = m.study AND e.run_id = m.run_id AND e.rank = m.rank
        AND e.pid = m.pid AND e.tid = m.tid
    WHERE e.dur_ns >= 0
    GROUP BY e.study, e.run_id, e.rank
),
all_windows AS (
    SELECT study, run_id, rank, 'gpu' AS rule, 'step' AS scope, step, start_ns, end_ns FROM gpu_step_windows
    UNION ALL
    SELECT study, run_id, rank, 'gpu', 'trace', CAST(NULL AS BIGINT), start_ns, end_ns FROM gpu_trace
    UNION ALL
    SELECT study, run_id, rank, 'cpu', 'step', step, start_ns, end_ns FROM cpu_steps
    UNION ALL
    SELECT study, run_id, rank, 'cpu', 'trace', CAST(NULL AS BIGINT), start_ns, end_ns FROM cpu_trace
)
SELECT
    study, run_id, rank, rule, scope, step, start_ns, end_ns,
    row_number() OVER (PARTITION BY study, run_id, rank ORDER BY scope, start_ns, step) AS window_no
FROM all_windows;
