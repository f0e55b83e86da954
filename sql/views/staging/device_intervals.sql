-- depends on: events, gpu_events, cpu_main_threads, cpu_compute_segments, comm_vocabulary
-- The intervals the breakdown sweeps over, per rank, each of one class: compute, comm, memory.
-- GPU ranks: their GPU events. CPU-only ranks: main-thread compute self time, and communication
-- spans (comm_vocabulary comm_span_prefix: gloo:*) on any thread of the rank as communication.
CREATE OR REPLACE VIEW device_intervals AS
WITH cpu_comm AS (
    SELECT e.study, e.run_id, e.rank, 'comm' AS class, e.ts_unix_ns AS start_ns, e.ts_unix_ns + e.dur_ns AS end_ns
    FROM events AS e
    SEMI JOIN cpu_main_threads AS m
        ON e.study = m.study AND e.run_id = m.run_id AND e.rank = m.rank
    SEMI JOIN comm_vocabulary AS v
        ON v.kind = 'comm_span_prefix' AND starts_with(e.name, v.pattern)
    WHERE e.dur_ns >= 0
)
SELECT study, run_id, rank, class, start_ns, end_ns FROM gpu_events
UNION ALL
SELECT study, run_id, rank, 'compute', start_ns, end_ns FROM cpu_compute_segments
UNION ALL
SELECT study, run_id, rank, class, start_ns, end_ns FROM cpu_comm;
