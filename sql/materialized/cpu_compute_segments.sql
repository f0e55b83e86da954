-- depends on: cpu_call_segments, cpu_calls, cpu_call_reach
-- CPU rule compute: the time in which a non-communication cpu_op is the innermost open event
-- of the main thread's call tree (its self time). The innermost open event is the one that
-- started last (ties: the one ending first, then a cpu_op before an annotation), so calls that
-- do not nest perfectly are handled. user_annotation and python_function self time is not
-- compute. Vectorised in two paths, chosen per rank (tree and segments: cpu_calls,
-- cpu_call_segments), both O(n log n) in the calls of a rank:
-- * a perfectly nested call tree (the usual case): the innermost open call over a segment at
--   depth d is the last call started at level d, an ASOF join. A rank is perfectly nested
--   when no call ends after its parent (the last call started one level up before it).
-- * otherwise (the ranks of cpu_call_reach): the innermost open call over a segment starting at
--   t is the highest call_order k <= last_started with end > t (the calls up to last_started
--   are those started by t). A search over the aligned blocks of cpu_call_reach: from
--   pos = last_started, jump back over the largest block ending at pos while its latest end is
--   <= t (the blocks grow), then halve the block that holds a later end, keeping the right half
--   when it does; at most 2 log2(n) steps per segment, each one join.
-- A TABLE, refreshed by the warehouse after ingest: device_intervals and comm_window_exposure
-- both read it, and the search is most of the CPU rule's cost.
CREATE OR REPLACE TABLE cpu_compute_segments AS
WITH RECURSIVE crossed_ranks AS (
    SELECT rank_key FROM cpu_call_reach WHERE call_order = 1 AND j = 0
),
nested_innermost AS (
    SELECT s.rank_key, s.start_ns, s.end_ns, c.is_compute
    FROM cpu_call_segments AS s
    ASOF JOIN cpu_calls AS c
        ON s.rank_key = c.rank_key AND s.depth = c.level AND s.last_started >= c.call_order
    ANTI JOIN crossed_ranks AS x ON s.rank_key = x.rank_key
),
search AS (
    -- pos: the last call not yet ruled out; j: the level of the block ending at pos tried next
    -- (up: the largest, bit_count((pos & -pos) - 1) = trailing zeros of pos; down: halving)
    SELECT
        s.rank_key, s.start_ns, s.end_ns, s.last_started AS pos,
        bit_count((s.last_started & -s.last_started) - 1) AS j, true AS up
    FROM cpu_call_segments AS s
    SEMI JOIN crossed_ranks AS x ON s.rank_key = x.rank_key
    UNION ALL
    SELECT
        w.rank_key, w.start_ns, w.end_ns,
        CASE WHEN r.reach_ns <= w.start_ns THEN w.pos - (CAST(1 AS BIGINT) << w.j) ELSE w.pos END,
        CASE
            WHEN w.up AND r.reach_ns <= w.start_ns THEN
                bit_count(((w.pos - (CAST(1 AS BIGINT) << w.j)) & -(w.pos - (CAST(1 AS BIGINT) << w.j))) - 1)
            ELSE w.j - 1
        END,
        w.up AND r.reach_ns <= w.start_ns
    FROM search AS w
    JOIN cpu_call_reach AS r ON r.rank_key = w.rank_key AND r.j = w.j AND r.call_order = w.pos
    WHERE w.up OR w.j >= 0
),
crossed_innermost AS (
    SELECT w.rank_key, w.start_ns, w.end_ns, r.is_compute
    FROM search AS w
    JOIN cpu_call_reach AS r ON r.rank_key = w.rank_key AND r.call_order = w.pos AND r.j = 0
    WHERE NOT w.up AND w.j < 0
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
