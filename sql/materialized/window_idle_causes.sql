-- depends on: gpu_events, window_breakdown
-- Idle causes of every GPU step window in integer ns (METHODOLOGY "Why the step waits", GPU
-- rule). An idle gap [a, b) of a rank's device timeline ends where the next GPU event starts;
-- with L the earliest launch among the events starting at b (NULL when none of them has its
-- launch in the trace): host_wait = max(0, min(b, L) - a), device_wait = (b - a) - host_wait,
-- unknown = b - a when L is NULL. A zero-length event at b ends a gap too.
-- Gaps: the events of a rank ordered by start (then launch); a gap precedes b when the latest end
-- of all earlier-starting events, a, is before b (one sort of the GPU events, no grouping).
-- Each gap is clipped to the step window holding a (ASOF: the latest non-empty window starting
-- at or before a); window edges are event starts, so no gap crosses one. Windows with no gap
-- get zeros; CPU ranks get no rows.
-- A TABLE, refreshed after every ingest.
CREATE OR REPLACE TABLE window_idle_causes AS
WITH windows AS MATERIALIZED (
    SELECT
        study, run_id, rank, window_no, start_ns, start_ns + window_ns AS end_ns,
        -- INTEGER: the window's sort key (rank_key, b, launch_ns) is then narrower, and sorts faster
        CAST(dense_rank() OVER (ORDER BY study, run_id, rank) AS INTEGER) AS rank_key
    FROM window_breakdown
    WHERE scope = 'step' AND rule = 'gpu'
),
rank_keys AS (
    SELECT DISTINCT study, run_id, rank, rank_key FROM windows
),
starts AS (
    SELECT k.rank_key, g.start_ns AS b, g.end_ns, g.launch_ns
    FROM gpu_events AS g
    JOIN rank_keys AS k ON g.study = k.study AND g.run_id = k.run_id AND g.rank = k.rank
),
reached AS (
    -- reach: the latest end of the rank's events up to this row, a running max on one global
    -- axis (a rank's values are offset by rank_key x 2^64, so an earlier rank never leaks in)
    SELECT
        rank_key,
        CAST(
            max(CAST(rank_key AS HUGEINT) * 18446744073709551616 + end_ns) OVER w
            - CAST(rank_key AS HUGEINT) * 18446744073709551616 AS BIGINT
        ) AS a,
        lead(rank_key) OVER w AS next_rank_key,
        lead(b) OVER w AS next_b,
        lead(launch_ns) OVER w AS next_launch_ns
    FROM starts
    WINDOW w AS (ORDER BY rank_key, b, launch_ns NULLS LAST ROWS UNBOUNDED PRECEDING)
),
gaps AS (
    -- only the last row of a start can precede a gap (any other has a >= its own end >= b); the
    -- next row is then the first of the next start, with its earliest launch (NULLS LAST)
    SELECT rank_key, a, next_b AS b, next_launch_ns AS launch_ns
    FROM reached
    WHERE next_rank_key = rank_key AND a < next_b
),
clipped AS (
    SELECT
        w.rank_key, w.window_no, g.launch_ns,
        greatest(g.a, w.start_ns) AS a,
        least(g.b, w.end_ns) AS b
    FROM gaps AS g
    ASOF JOIN (SELECT * FROM windows WHERE end_ns > start_ns) AS w
        ON g.rank_key = w.rank_key AND g.a >= w.start_ns
    WHERE g.a < w.end_ns
),
caused AS (
    SELECT
        rank_key, window_no,
        sum(CASE WHEN launch_ns IS NOT NULL THEN greatest(0, least(b, launch_ns) - a) END) AS host_wait_ns,
        sum(CASE WHEN launch_ns IS NOT NULL THEN (b - a) - greatest(0, least(b, launch_ns) - a) END)
            AS device_wait_ns,
        sum(CASE WHEN launch_ns IS NULL THEN b - a END) AS unknown_ns
    FROM clipped
    WHERE b > a
    GROUP BY rank_key, window_no
)
SELECT
    w.study, w.run_id, w.rank, w.window_no,
    CAST(coalesce(c.host_wait_ns, 0) AS BIGINT) AS idle_host_wait_ns,
    CAST(coalesce(c.device_wait_ns, 0) AS BIGINT) AS idle_device_wait_ns,
    CAST(coalesce(c.unknown_ns, 0) AS BIGINT) AS idle_unknown_ns
FROM windows AS w
LEFT JOIN caused AS c ON w.rank_key = c.rank_key AND w.window_no = c.window_no;
