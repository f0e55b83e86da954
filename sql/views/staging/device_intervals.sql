-- The intervals the breakdown sweeps over, per rank, each of one class: compute, comm, memory.
-- GPU ranks: their GPU events. CPU-only ranks: main-thread compute self time, and gloo:* spans
-- on any thread of the rank as communication.
CREATE OR REPLACE VIEW device_intervals AS
WITH cpu_comm AS (
    SELECT e.study, e.run_id, e.rank, 'comm' AS class, e.ts_unix_ns AS start_ns, e.ts_unix_ns + e.dur_ns AS end_ns
    FROM events AS e
    SEMI JOIN cpu_main_threads AS m
        ON e.study = m.study AND e.run_id = m.run_id AND e.rank = m.rank
    WHERE starts_with(e.name, 'gloo:') AND e.dur_ns >= 0
)
SELECT study, run_id, rank, class, start_ns, end_ns FROM gpu_events
UNION ALL
SELECT study, run_id, rank, 'compute', start_ns, end_ns FROM cpu_compute_segments
UNION ALL
SELECT study, run_id, rank, class, start_ns, end_ns FROM cpu_comm;
