-- The breakdown of every window in integer nanoseconds (public views convert to µs).
-- Sweep line per rank: +1/-1 boundary points per class, running counts by window functions,
-- then elementary segments with flags; window boundaries are inserted as zero-change points so
-- every segment lies wholly inside or outside each window. Segments are attached to windows by
-- ASOF join. compute + exposed_comm + other + idle = window holds exactly, in integers.
CREATE OR REPLACE VIEW window_breakdown AS
WITH points AS (
    SELECT study, run_id, rank, start_ns AS t,
        CAST(class = 'compute' AS INTEGER) AS d_compute,
        CAST(class = 'comm' AS INTEGER) AS d_comm,
        CAST(class = 'memory' AS INTEGER) AS d_memory
    FROM device_intervals
    UNION ALL
    SELECT study, run_id, rank, end_ns,
        -CAST(class = 'compute' AS INTEGER), -CAST(class = 'comm' AS INTEGER), -CAST(class = 'memory' AS INTEGER)
    FROM device_intervals
    UNION ALL
    SELECT study, run_id, rank, start_ns, 0, 0, 0 FROM device_windows
    UNION ALL
    SELECT study, run_id, rank, end_ns, 0, 0, 0 FROM device_windows
),
changes AS (
    SELECT study, run_id, rank, t,
        sum(d_compute) AS d_compute, sum(d_comm) AS d_comm, sum(d_memory) AS d_memory
    FROM points
    GROUP BY study, run_id, rank, t
),
levels AS (
    SELECT
        study, run_id, rank, t AS seg_start_ns,
        lead(t) OVER w AS seg_end_ns,
        sum(d_compute) OVER w_run AS n_compute,
        sum(d_comm) OVER w_run AS n_comm,
        sum(d_memory) OVER w_run AS n_memory
    FROM changes
    WINDOW
        w AS (PARTITION BY study, run_id, rank ORDER BY t),
        w_run AS (PARTITION BY study, run_id, rank ORDER BY t ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
segments AS (
    SELECT
        study, run_id, rank, seg_start_ns, seg_end_ns,
        seg_end_ns - seg_start_ns AS len_ns,
        n_compute > 0 AS in_compute,
        n_comm > 0 AS in_comm,
        n_memory > 0 AS in_memory
    FROM levels
    WHERE seg_end_ns IS NOT NULL
),
step_windows AS (
    -- empty windows hold no segment, and must not shadow a window starting at the same point
    SELECT * FROM device_windows WHERE scope = 'step' AND end_ns > start_ns
),
trace_windows AS (
    SELECT * FROM device_windows WHERE scope = 'trace' AND end_ns > start_ns
),
attached AS (
    SELECT w.study, w.run_id, w.rank, w.window_no, s.len_ns, s.in_compute, s.in_comm, s.in_memory
    FROM segments AS s
    ASOF JOIN step_windows AS w
        ON s.study = w.study AND s.run_id = w.run_id AND s.rank = w.rank AND s.seg_start_ns >= w.start_ns
    WHERE s.seg_start_ns < w.end_ns
    UNION ALL
    SELECT w.study, w.run_id, w.rank, w.window_no, s.len_ns, s.in_compute, s.in_comm, s.in_memory
    FROM segments AS s
    ASOF JOIN trace_windows AS w
        ON s.study = w.study AND s.run_id = w.run_id AND s.rank = w.rank AND s.seg_start_ns >= w.start_ns
    WHERE s.seg_start_ns < w.end_ns
),
measured AS (
    SELECT
        study, run_id, rank, window_no,
        sum(len_ns) FILTER (WHERE in_compute) AS compute_ns,
        sum(len_ns) FILTER (WHERE in_comm) AS comm_ns,
        sum(len_ns) FILTER (WHERE in_comm AND NOT in_compute) AS exposed_comm_ns,
        sum(len_ns) FILTER (WHERE in_memory AND NOT in_compute AND NOT in_comm) AS other_ns,
        sum(len_ns) FILTER (WHERE in_compute OR in_comm OR in_memory) AS busy_ns
    FROM attached
    GROUP BY study, run_id, rank, window_no
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
FROM device_windows AS w
LEFT JOIN measured AS m
    ON w.study = m.study AND w.run_id = m.run_id AND w.rank = m.rank AND w.window_no = m.window_no;
