-- depends on: device_intervals, device_windows
-- The breakdown of every window in integer nanoseconds (public views convert to µs).
-- A TABLE, refreshed by the warehouse after every ingest that changed its inputs: every
-- breakdown mart reads it, and the sweep is the expensive part of the analysis.
-- Sweep line: +1/-1 boundary points per class and zero-change points at window edges, sorted
-- on one global axis (rank_key, t); running counts are sums over that order (the default RANGE
-- frame, so points at the same instant all count at once). A rank's points sum to zero, so a
-- running sum never leaks into the next rank, and one global sort is much cheaper than a
-- window partitioned by three text keys. Each elementary segment [t, next t) then lies wholly
-- inside or outside each window. Its step window is the latest non-empty step window starting
-- at or before it (running max of step_seq, numbered by start within a rank; same rule as an
-- ASOF join), kept when the segment starts before that window's end; the trace window is
-- found by range. compute + exposed_comm + other + idle = window holds exactly, in integers.
CREATE OR REPLACE TABLE window_breakdown AS
WITH windows AS MATERIALIZED (
    SELECT
        *,
        dense_rank() OVER (ORDER BY study, run_id, rank) AS rank_key,
        -- empty windows hold no segment, and must not shadow a window starting at the same point
        CASE WHEN scope = 'step' AND end_ns > start_ns THEN
            row_number() OVER (ORDER BY scope = 'step' AND end_ns > start_ns DESC, study, run_id, rank, start_ns, step)
        END AS step_seq
    FROM device_windows
),
intervals AS MATERIALIZED (
    -- ranks without a window have nothing to measure
    SELECT k.rank_key, i.class, i.start_ns, i.end_ns
    FROM device_intervals AS i
    JOIN (SELECT DISTINCT study, run_id, rank, rank_key FROM windows) AS k
        ON i.study = k.study AND i.run_id = k.run_id AND i.rank = k.rank
),
points AS (
    SELECT rank_key, start_ns AS t,
        CAST(class = 'compute' AS INTEGER) AS d_compute,
        CAST(class = 'comm' AS INTEGER) AS d_comm,
        CAST(class = 'memory' AS INTEGER) AS d_memory,
        CAST(NULL AS BIGINT) AS step_seq
    FROM intervals
    UNION ALL
    SELECT rank_key, end_ns,
        -CAST(class = 'compute' AS INTEGER), -CAST(class = 'comm' AS INTEGER), -CAST(class = 'memory' AS INTEGER),
        NULL
    FROM intervals
    UNION ALL
    SELECT rank_key, start_ns, 0, 0, 0, step_seq FROM windows
    UNION ALL
    SELECT rank_key, end_ns, 0, 0, 0, NULL FROM windows
),
levels AS (
    SELECT
        rank_key, t AS seg_start_ns,
        lead(t) OVER w AS seg_end_ns,
        lead(rank_key) OVER w AS next_rank_key,
        sum(d_compute) OVER w AS n_compute,
        sum(d_comm) OVER w AS n_comm,
        sum(d_memory) OVER w AS n_memory,
        max(step_seq) OVER w AS step_seq
    FROM points
    WINDOW w AS (ORDER BY rank_key, t)
),
segments AS MATERIALIZED (
    -- points at the same instant leave zero-length segments between them: dropped
    SELECT
        rank_key, seg_start_ns, step_seq,
        seg_end_ns - seg_start_ns AS len_ns,
        n_compute > 0 AS in_compute,
        n_comm > 0 AS in_comm,
        n_memory > 0 AS in_memory
    FROM levels
    WHERE next_rank_key = rank_key AND seg_end_ns > seg_start_ns
),
attached AS (
    SELECT w.rank_key, w.window_no, s.len_ns, s.in_compute, s.in_comm, s.in_memory
    FROM segments AS s
    JOIN windows AS w ON s.rank_key = w.rank_key AND s.step_seq = w.step_seq
    WHERE s.seg_start_ns < w.end_ns
    UNION ALL
    SELECT w.rank_key, w.window_no, s.len_ns, s.in_compute, s.in_comm, s.in_memory
    FROM segments AS s
    JOIN windows AS w ON s.rank_key = w.rank_key
    WHERE w.scope = 'trace' AND s.seg_start_ns >= w.start_ns AND s.seg_start_ns < w.end_ns
),
measured AS (
    SELECT
        rank_key, window_no,
        sum(len_ns) FILTER (WHERE in_compute) AS compute_ns,
        sum(len_ns) FILTER (WHERE in_comm) AS comm_ns,
        sum(len_ns) FILTER (WHERE in_comm AND NOT in_compute) AS exposed_comm_ns,
        sum(len_ns) FILTER (WHERE in_memory AND NOT in_compute AND NOT in_comm) AS other_ns,
        sum(len_ns) FILTER (WHERE in_compute OR in_comm OR in_memory) AS busy_ns
    FROM attached
    GROUP BY rank_key, window_no
)
SELECT
    w.study, w.run_id, w.rank, w.rule, w.scope, w.step, w.window_no,
    w.start_ns,
    w.end_ns - w.start_ns AS window_ns,
    CAST(coalesce(m.compute_ns, 0) AS BIGINT) AS compute_ns,
    CAST(coalesce(m.comm_ns, 0) AS BIGINT) AS comm_ns,
    CAST(coalesce(m.exposed_comm_ns, 0) AS BIGINT) AS exposed_comm_ns,
    CAST(coalesce(m.comm_ns, 0) - coalesce(m.exposed_comm_ns, 0) AS BIGINT) AS overlapped_comm_ns,
    CAST(coalesce(m.other_ns, 0) AS BIGINT) AS other_ns,
    CAST(coalesce(m.busy_ns, 0) AS BIGINT) AS busy_ns,
    CAST(w.end_ns - w.start_ns - coalesce(m.busy_ns, 0) AS BIGINT) AS idle_ns
FROM windows AS w
LEFT JOIN measured AS m ON w.rank_key = m.rank_key AND w.window_no = m.window_no;
