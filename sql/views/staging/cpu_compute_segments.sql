-- depends on: cpu_call_segments, cpu_calls
-- CPU rule compute: the time in which a non-communication cpu_op is the innermost open event
-- of the main thread's call tree (its self time). The innermost open event is the one that
-- started last (ties: the one ending first, then a cpu_op before an annotation), so calls that
-- do not nest perfectly are handled. user_annotation and python_function self time is not
-- compute. Vectorised in two paths, chosen per rank (tree and segments: cpu_calls,
-- cpu_call_segments):
-- * a perfectly nested call tree (the usual case): the innermost open call over a segment at
--   depth d is the last call started at level d, an ASOF join. A rank is perfectly nested
--   when no call ends after its parent (the last call started one level up before it).
-- * otherwise: each segment range-joined to every call open over it (an IEJoin on one global
--   axis where each rank has its own stretch), the latest started one winning.
CREATE OR REPLACE VIEW cpu_compute_segments AS
WITH crossed_ranks AS (
    SELECT DISTINCT child.rank_key
    FROM cpu_calls AS child
    ASOF JOIN cpu_calls AS parent
        ON child.rank_key = parent.rank_key
        AND child.level - 1 = parent.level
        AND child.call_order > parent.call_order
    WHERE child.end_ns > parent.end_ns
),
nested_innermost AS (
    SELECT s.rank_key, s.start_ns, s.end_ns, c.is_compute
    FROM cpu_call_segments AS s
    ASOF JOIN cpu_calls AS c
        ON s.rank_key = c.rank_key AND s.depth = c.level AND s.last_started >= c.call_order
    ANTI JOIN crossed_ranks AS x ON s.rank_key = x.rank_key
),
lanes AS (
    SELECT
        c.rank_key,
        min(c.start_ns) AS origin_ns,
        sum(max(c.end_ns) - min(c.start_ns) + 1) OVER (ORDER BY c.rank_key)
            - (max(c.end_ns) - min(c.start_ns) + 1) AS lane_start
    FROM cpu_calls AS c
    SEMI JOIN crossed_ranks AS x ON c.rank_key = x.rank_key
    GROUP BY c.rank_key
),
placed AS (
    SELECT
        c.call_order, c.is_compute,
        l.lane_start + (c.start_ns - l.origin_ns) AS g_start,
        l.lane_start + (c.end_ns - l.origin_ns) AS g_end
    FROM cpu_calls AS c
    JOIN lanes AS l ON c.rank_key = l.rank_key
),
crossed_innermost AS (
    SELECT s.rank_key, s.start_ns, s.end_ns, arg_max(p.is_compute, p.call_order) AS is_compute
    FROM cpu_call_segments AS s
    JOIN lanes AS l ON s.rank_key = l.rank_key
    JOIN placed AS p
        ON p.g_start <= l.lane_start + (s.start_ns - l.origin_ns)
        AND p.g_end > l.lane_start + (s.start_ns - l.origin_ns)
    GROUP BY s.rank_key, s.start_ns, s.end_ns
),
innermost AS (
    SELECT * FROM nested_innermost
    UNION ALL
    SELECT * FROM crossed_innermost
),
rank_keys AS (
    SELECT DISTINCT study, run_id, rank, rank_key FROM cpu_calls
)
SELECT k.study, k.run_id, k.rank, i.start_ns, i.end_ns
FROM innermost AS i
JOIN rank_keys AS k ON i.rank_key = k.rank_key
WHERE i.is_compute;
