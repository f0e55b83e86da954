-- depends on: cpu_calls
-- For the CPU-only ranks whose calls do not nest perfectly (some call ends after its parent, the
-- last call started one level up before it): the latest end in every aligned block of calls, a
-- segment tree over call_order. A block of level j holds the 2^j calls
-- call_order - 2^j + 1 .. call_order (call_order a multiple of 2^j; only whole blocks), built
-- pairwise from level j - 1; 2n rows for n calls. is_compute is set on level 0 (one call).
-- cpu_compute_segments searches it for the innermost open call over each segment.
-- A TABLE, refreshed by the warehouse after ingest (see cpu_calls): the search joins it once per
-- step, and a relation computed in the same query would be recomputed at each.
CREATE OR REPLACE TABLE cpu_call_reach AS
WITH RECURSIVE crossed_ranks AS (
    SELECT DISTINCT child.rank_key
    FROM cpu_calls AS child
    ASOF JOIN cpu_calls AS parent
        ON child.rank_key = parent.rank_key
        AND child.level - 1 = parent.level
        AND child.call_order > parent.call_order
    WHERE child.end_ns > parent.end_ns
),
blocks AS (
    -- block: the block's number within its level, from 1
    SELECT c.study, c.run_id, c.rank_key, 0 AS j, c.call_order AS block, c.end_ns AS reach_ns, c.is_compute
    FROM cpu_calls AS c
    SEMI JOIN crossed_ranks AS x ON c.rank_key = x.rank_key
    UNION ALL
    SELECT any_value(study), any_value(run_id), rank_key, any_value(j) + 1, (block + 1) // 2, max(reach_ns), NULL
    FROM blocks
    GROUP BY rank_key, (block + 1) // 2
    HAVING count(*) = 2
)
SELECT study, run_id, rank_key, CAST(j AS INTEGER) AS j, block << j AS call_order, reach_ns, is_compute
FROM blocks;
