-- depends on: events, cpu_main_threads, comm_vocabulary
-- The main thread's call tree of every CPU-only rank, one row per call, with its level: the
-- depth just after it starts (at one instant ends come first, intervals being half-open, then
-- starts in call order). call_order ranks calls by start, then longer first, then an
-- annotation before a cpu_op, so the call that started last is the highest call_order.
-- Communication spans (comm_vocabulary comm_span_prefix: gloo:*) are left out of the tree (they
-- overlap other calls without nesting); a cpu_op is compute unless comm_vocabulary names it a
-- communication op (host_op_prefix, host_op_name). Events without a name are left out. kind and
-- name are kept for cpu_op_totals (the self time of each op name).
-- A TABLE, refreshed by the warehouse after ingest: the ASOF joins of cpu_compute_segments are
-- fast on tables and very slow on the same rows computed inside one query.
CREATE OR REPLACE TABLE cpu_calls AS
WITH main_thread_events AS (
    SELECT
        e.study, e.run_id, e.rank, e.kind, e.name,
        e.ts_unix_ns AS start_ns,
        e.ts_unix_ns + e.dur_ns AS end_ns
    FROM events AS e
    JOIN cpu_main_threads AS m
        ON e.study = m.study AND e.run_id = m.run_id AND e.rank = m.rank
        AND e.pid = m.pid AND e.tid = m.tid
    WHERE e.name IS NOT NULL AND e.dur_ns > 0
),
vocabulary_names AS (
    -- decided once per distinct name: comm_vocabulary is tiny, names repeat a lot
    SELECT DISTINCT n.name, v.kind
    FROM (SELECT DISTINCT name FROM main_thread_events) AS n
    JOIN comm_vocabulary AS v
        ON (v.kind IN ('host_op_prefix', 'comm_span_prefix') AND starts_with(n.name, v.pattern))
        OR (v.kind = 'host_op_name' AND n.name = v.pattern)
),
tree AS (
    SELECT
        study, run_id, rank, kind, name, start_ns, end_ns,
        kind = 'cpu_op' AND name NOT IN (
            SELECT name FROM vocabulary_names WHERE kind IN ('host_op_prefix', 'host_op_name')
        ) AS is_compute
    FROM main_thread_events
    WHERE name NOT IN (SELECT name FROM vocabulary_names WHERE kind = 'comm_span_prefix')
),
ordered AS (
    SELECT
        *,
        -- a key of the rank alone (not of the other ranks present), so one run's rows can be
        -- recomputed by themselves (warehouse.refresh_runs); 63 bits of a hash
        CAST(hash(study, run_id, rank) >> 1 AS BIGINT) AS rank_key,
        CAST(row_number() OVER (
            PARTITION BY study, run_id, rank ORDER BY start_ns, end_ns DESC, is_compute
        ) AS BIGINT) AS call_order
    FROM tree
),
points AS (
    SELECT rank_key, start_ns AS t, 1 AS delta, call_order FROM ordered
    UNION ALL
    SELECT rank_key, end_ns, -1, NULL FROM ordered
),
levels AS (
    SELECT
        rank_key, call_order,
        CAST(sum(delta) OVER (
            PARTITION BY rank_key ORDER BY t, delta, call_order ROWS UNBOUNDED PRECEDING
        ) AS BIGINT) AS level,
        delta
    FROM points
)
SELECT
    o.study, o.run_id, o.rank, o.rank_key, o.call_order, l.level, o.start_ns, o.end_ns, o.is_compute,
    o.kind, o.name
FROM ordered AS o
JOIN levels AS l ON l.rank_key = o.rank_key AND l.call_order = o.call_order AND l.delta = 1;
