-- depends on: comm_intervals, gpu_events, cpu_compute_segments, window_breakdown
-- Exposed communication of every communication interval in every step window it overlaps, in
-- integer ns (METHODOLOGY "Why the step waits": each exposed instant is split equally among the
-- intervals in flight then), and its split into wait (the interval's first dur - transfer) and
-- transfer (its last transfer). Compute is what the breakdown counts: compute-class GPU events
-- on GPU ranks, cpu_compute_segments on CPU-only ranks.
-- Exact arithmetic: per rank, D = lcm of the numbers of intervals in flight over its exposed
-- segments; a running sum Q(t) of len x D / k over exposed segments (one global axis
-- (rank_key, t), HUGEINT) gives each clipped interval [lo, hi) its exact share N / D with
-- N = Q(hi) - Q(lo). The shares of a window are rounded to integer ns by largest remainder
-- (ties: earlier interval first), so they sum to its exposed_comm_ns exactly and each is within
-- 1 ns of the exact share; exposed_wait is the exact wait share rounded half up (at most the
-- interval's exposed), exposed_transfer the rest.
-- Only compute that can touch a communication interval enters the sweep: events starting or
-- ending in a 2^20 ns bucket some interval touches, or spanning three buckets or more (a
-- superset, which changes nothing: compute only counts as present or not).
-- A TABLE, refreshed after every ingest.
CREATE OR REPLACE TABLE comm_window_exposure AS
WITH windows AS MATERIALIZED (
    SELECT
        w.study, w.run_id, w.rank, w.window_no, w.step, w.start_ns, w.start_ns + w.window_ns AS end_ns,
        CAST(dense_rank() OVER (ORDER BY w.study, w.run_id, w.rank) AS INTEGER) AS rank_key
    FROM window_breakdown AS w
    SEMI JOIN comm_intervals AS c ON w.study = c.study AND w.run_id = c.run_id AND w.rank = c.rank
    WHERE w.scope = 'step' AND w.window_ns > 0
),
rank_keys AS (
    SELECT DISTINCT study, run_id, rank, rank_key FROM windows
),
comm AS MATERIALIZED (
    SELECT k.rank_key, c.interval_no, c.start_ns, c.end_ns, c.transfer_ns
    FROM comm_intervals AS c
    JOIN rank_keys AS k ON c.study = k.study AND c.run_id = k.run_id AND c.rank = k.rank
),
buckets AS (
    SELECT DISTINCT rank_key, unnest(generate_series(start_ns // 1048576, (end_ns - 1) // 1048576)) AS bucket
    FROM comm
    WHERE end_ns > start_ns
),
gpu_compute AS (
    SELECT k.rank_key, g.start_ns, g.end_ns, g.start_ns // 1048576 AS first_bucket, (g.end_ns - 1) // 1048576 AS last_bucket
    FROM gpu_events AS g
    JOIN rank_keys AS k ON g.study = k.study AND g.run_id = k.run_id AND g.rank = k.rank
    WHERE g.class = 'compute' AND g.end_ns > g.start_ns
),
compute AS MATERIALIZED (
    SELECT g.rank_key, g.start_ns, g.end_ns
    FROM gpu_compute AS g
    LEFT JOIN buckets AS f ON g.rank_key = f.rank_key AND g.first_bucket = f.bucket
    LEFT JOIN buckets AS l ON g.rank_key = l.rank_key AND g.last_bucket = l.bucket
    WHERE f.bucket IS NOT NULL OR l.bucket IS NOT NULL OR g.last_bucket - g.first_bucket >= 2
    UNION ALL
    SELECT k.rank_key, s.start_ns, s.end_ns
    FROM cpu_compute_segments AS s
    JOIN rank_keys AS k ON s.study = k.study AND s.run_id = k.run_id AND s.rank = k.rank
),
points AS (
    -- looked_up: a point the shares below look Q up at (interval ends, splits, window edges).
    -- Not grouped by t: points at one instant are peers of the window below
    SELECT rank_key, start_ns AS t, 1 AS d_comm, 0 AS d_compute, true AS looked_up FROM comm
    UNION ALL
    SELECT rank_key, end_ns, -1, 0, true FROM comm
    UNION ALL
    SELECT rank_key, end_ns - transfer_ns, 0, 0, true FROM comm WHERE transfer_ns IS NOT NULL
    UNION ALL
    SELECT rank_key, start_ns, 0, 1, false FROM compute
    UNION ALL
    SELECT rank_key, end_ns, 0, -1, false FROM compute
    UNION ALL
    SELECT rank_key, start_ns, 0, 0, true FROM windows
    UNION ALL
    SELECT rank_key, end_ns, 0, 0, true FROM windows
),
levels AS (
    -- the counts are over the default RANGE frame, so every point at one instant has the counts
    -- after all of them; lead() is by rows, so of the points at one instant only the last one
    -- starts a segment of non-zero length
    SELECT
        rank_key, t, looked_up,
        lead(t) OVER w - t AS len_ns,
        lead(rank_key) OVER w AS next_rank_key,
        CAST(sum(d_comm) OVER w AS BIGINT) AS n_comm,
        sum(d_compute) OVER w AS n_compute
    FROM points
    WINDOW w AS (ORDER BY rank_key, t)
),
segments AS MATERIALIZED (
    SELECT
        rank_key, t, looked_up, len_ns, n_comm,
        next_rank_key = rank_key AND n_comm > 0 AND n_compute = 0 AS exposed
    FROM levels
),
denominators AS (
    SELECT
        rank_key,
        list_reduce(list(DISTINCT CAST(n_comm AS HUGEINT)), lambda a, b: lcm(a, b)) AS d
    FROM segments
    WHERE exposed
    GROUP BY rank_key
),
running AS MATERIALIZED (
    -- q = Q(t): the scaled exposed shares of every segment before t on this axis; only exposed
    -- segments add to it and only looked-up points are read, so the others are left out. The
    -- zero-length segments of an instant sort before its other one, so every point at t reads
    -- the same q
    SELECT
        s.rank_key, s.t, s.looked_up,
        coalesce(sum(CASE WHEN s.exposed THEN s.len_ns * (d.d // s.n_comm) ELSE 0 END) OVER (
            ORDER BY s.rank_key, s.t, s.len_ns > 0 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ), 0) AS q
    FROM segments AS s
    LEFT JOIN denominators AS d ON s.rank_key = d.rank_key
    WHERE s.exposed OR s.looked_up
),
lookups AS MATERIALIZED (
    SELECT DISTINCT rank_key, t, q FROM running WHERE looked_up
),
pieces AS (
    SELECT
        w.study, w.run_id, w.rank, w.rank_key, w.window_no, w.step, c.interval_no, c.start_ns,
        greatest(c.start_ns, w.start_ns) AS lo_ns,
        least(c.end_ns, w.end_ns) AS hi_ns,
        CASE WHEN c.transfer_ns IS NOT NULL THEN
            least(least(c.end_ns, w.end_ns), greatest(greatest(c.start_ns, w.start_ns), c.end_ns - c.transfer_ns))
        END AS split_ns
    FROM comm AS c
    JOIN windows AS w ON c.rank_key = w.rank_key AND c.start_ns < w.end_ns AND c.end_ns > w.start_ns
),
exact AS (
    SELECT
        p.*,
        coalesce(d.d, 1) AS d,
        qh.q - ql.q AS n,
        qs.q - ql.q AS n_wait
    FROM pieces AS p
    LEFT JOIN denominators AS d ON p.rank_key = d.rank_key
    JOIN lookups AS ql ON p.rank_key = ql.rank_key AND p.lo_ns = ql.t
    JOIN lookups AS qh ON p.rank_key = qh.rank_key AND p.hi_ns = qh.t
    LEFT JOIN lookups AS qs ON p.rank_key = qs.rank_key AND p.split_ns = qs.t
),
ranked AS (
    SELECT
        *,
        n // d AS floor_ns,
        sum(n) OVER win // d - sum(n // d) OVER win AS deficit,
        row_number() OVER (PARTITION BY rank_key, window_no ORDER BY n % d DESC, start_ns, interval_no) AS nth
    FROM exact
    WINDOW win AS (PARTITION BY rank_key, window_no)
),
rounded AS (
    SELECT *, CAST(floor_ns + CASE WHEN nth <= deficit THEN 1 ELSE 0 END AS BIGINT) AS exposed_ns
    FROM ranked
)
SELECT
    study, run_id, rank, window_no, step, interval_no, lo_ns, hi_ns,
    hi_ns - lo_ns AS in_window_ns,
    exposed_ns,
    exposed_wait_ns,
    exposed_ns - exposed_wait_ns AS exposed_transfer_ns
FROM (
    -- least() skips NULLs: an unmatched interval (n_wait NULL) must stay NULL
    SELECT
        *,
        CASE WHEN n_wait IS NOT NULL THEN CAST(least(exposed_ns, (2 * n_wait + d) // (2 * d)) AS BIGINT) END
            AS exposed_wait_ns
    FROM rounded
) AS waited;
