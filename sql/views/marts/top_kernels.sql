-- depends on: run_event_ranks, gpu_events, cpu_op_totals
-- One row per kernel or op name of a run: how often it ran, its time over the whole trace (first
-- to last event, no step filter) per rank, and its place among the run's names by time.
-- A run with device events (gpu_events: kernels, memcpy and memset on a stream) ranks those,
-- with the breakdown's class (compute, comm, memory); a CPU-only run ranks the cpu_op names of its
-- main threads (the CPU rule's device) by self time, class NULL: ops nest, and inclusive time
-- would count `MmBackward0` again in `evaluate_function: MmBackward0` (inclusive_us keeps it).
-- Per rank: divided by the ranks of the run that have events. Ties: by name, then kind.
CREATE OR REPLACE VIEW top_kernels AS
WITH device_names AS (
    SELECT
        study, run_id, kind, name, class, 'gpu' AS rule,
        count(*) AS calls, sum(end_ns - start_ns) AS total_ns, sum(end_ns - start_ns) AS inclusive_ns
    FROM gpu_events
    WHERE end_ns > start_ns
    GROUP BY study, run_id, kind, name, class
),
op_names AS (
    SELECT
        study, run_id, kind, name, CAST(NULL AS VARCHAR) AS class, 'cpu' AS rule, calls,
        self_ns AS total_ns, total_ns AS inclusive_ns
    FROM cpu_op_totals
    WHERE self_ns > 0
),
named AS (
    SELECT * FROM device_names
    UNION ALL
    SELECT * FROM op_names
)
SELECT
    n.study,
    n.run_id,
    n.rule,
    n.kind,
    n.name,
    n.class,
    n.calls,
    r.n_ranks,
    n.total_ns / 1e3 AS total_us,
    n.total_ns / 1e3 / r.n_ranks AS us_per_rank,
    row_number() OVER (PARTITION BY n.study, n.run_id ORDER BY n.total_ns DESC, n.name, n.kind) AS time_rank,
    n.inclusive_ns / 1e3 AS inclusive_us
FROM named AS n
JOIN run_event_ranks AS r ON n.study = r.study AND n.run_id = r.run_id;
