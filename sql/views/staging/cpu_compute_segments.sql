-- CPU rule compute: the time in which a non-communication cpu_op is the innermost open event
-- of the main thread's call tree (its self time). The innermost open event is the one that
-- started last (ties: the one ending first, then a cpu_op before an annotation), so calls that
-- do not nest perfectly are handled. gloo:* spans are left out of the tree; user_annotation and
-- python_function self time is not compute.
-- Vectorised: elementary segments between consecutive boundaries, each joined to the events
-- open over it. Each rank is shifted onto its own stretch of one global axis so the join is a
-- pure range join (IEJoin) instead of a per-rank product.
CREATE OR REPLACE VIEW cpu_compute_segments AS
WITH tree AS (
    SELECT
        e.study, e.run_id, e.rank,
        e.ts_unix_ns AS start_ns,
        e.ts_unix_ns + e.dur_ns AS end_ns,
        e.kind = 'cpu_op'
            AND NOT (
                starts_with(e.name, 'c10d::') OR starts_with(e.name, '_c10d_functional::')
                OR starts_with(e.name, 'gloo:') OR starts_with(e.name, 'nccl:')
                OR starts_with(e.name, 'record_param_comms')
            ) AS is_compute
    FROM events AS e
    JOIN cpu_main_threads AS m
        ON e.study = m.study AND e.run_id = m.run_id AND e.rank = m.rank
        AND e.pid = m.pid AND e.tid = m.tid
    WHERE NOT starts_with(e.name, 'gloo:') AND e.dur_ns > 0
),
axis AS (
    SELECT
        study, run_id, rank,
        min(start_ns) AS origin_ns,
        row_number() OVER (ORDER BY study, run_id, rank) - 1 AS lane
    FROM tree
    GROUP BY study, run_id, rank
),
stride AS (
    SELECT max(t.end_ns - a.origin_ns) + 1 AS ns
    FROM tree AS t
    JOIN axis AS a ON t.study = a.study AND t.run_id = a.run_id AND t.rank = a.rank
),
placed AS (
    SELECT
        t.*,
        a.lane * s.ns + (t.start_ns - a.origin_ns) AS g_start,
        a.lane * s.ns + (t.end_ns - a.origin_ns) AS g_end,
        row_number() OVER (
            PARTITION BY t.study, t.run_id, t.rank
            ORDER BY t.start_ns, t.end_ns DESC, t.is_compute
        ) AS depth_order
    FROM tree AS t
    JOIN axis AS a ON t.study = a.study AND t.run_id = a.run_id AND t.rank = a.rank
    CROSS JOIN stride AS s
),
bounds AS (
    SELECT study, run_id, rank, g_start AS g, start_ns AS t FROM placed
    UNION
    SELECT study, run_id, rank, g_end AS g, end_ns AS t FROM placed
),
segments AS (
    SELECT
        study, run_id, rank, g, t AS seg_start_ns,
        lead(t) OVER (PARTITION BY study, run_id, rank ORDER BY t) AS seg_end_ns
    FROM bounds
),
innermost AS (
    SELECT
        s.study, s.run_id, s.rank, s.seg_start_ns, s.seg_end_ns,
        arg_max(p.is_compute, p.depth_order) AS is_compute
    FROM segments AS s
    JOIN placed AS p ON p.g_start <= s.g AND p.g_end > s.g
    WHERE s.seg_end_ns IS NOT NULL
    GROUP BY s.study, s.run_id, s.rank, s.seg_start_ns, s.seg_end_ns
)
SELECT study, run_id, rank, seg_start_ns AS start_ns, seg_end_ns AS end_ns
FROM innermost
WHERE is_compute;
