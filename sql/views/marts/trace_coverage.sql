-- depends on: traces, window_breakdown, runs
-- Which rule gave each ingested rank its breakdown, or why it has none, and whether its run has
-- every rank's trace (nothing is missing silently). Reads only DuckDB tables: the parse-time
-- facts of `traces`, the breakdown and the runs' world sizes. The op-level columns say what the
-- op, module and memory views have to work with per rank (NULL: ingested before tracehouse kept ops).
CREATE OR REPLACE VIEW trace_coverage AS
WITH measured AS (
    SELECT
        study, run_id, rank,
        min(rule) AS rule,
        count(*) FILTER (WHERE scope = 'step') AS step_windows
    FROM window_breakdown
    GROUP BY study, run_id, rank
),
unknown AS (
    -- "cat (n events), ..." of the categories tracehouse does not know, largest first
    SELECT
        t.content_hash,
        string_agg(
            format('{} ({:,} events)', j.key, CAST(j.value AS BIGINT)), ', '
            ORDER BY CAST(j.value AS BIGINT) DESC, j.key
        ) AS categories
    FROM traces AS t, json_each(t.unknown_categories) AS j
    GROUP BY t.content_hash
),
reasons AS (
    SELECT
        t.study, t.run_id, t.rank,
        m.rule,
        coalesce(m.step_windows, 0) AS step_windows,
        t.n_steps,
        t.n_device_events,
        t.n_streamless_device_events,
        t.n_ops, t.n_ops_with_shapes, t.n_ops_in_modules, t.n_op_launches, t.n_linked_launches, t.n_memory_events,
        u.categories AS unknown_categories,
        CASE
            WHEN m.step_windows > 0 THEN NULL
            WHEN m.rule IS NOT NULL THEN format('the {} rule found no step window with activity', m.rule)
            WHEN t.n_device_events IS NULL
                THEN 'no breakdown (ingested by an older tracehouse, which did not record why)'
            WHEN u.categories IS NOT NULL
                THEN format('no device events; device activity of kinds tracehouse does not know: {}: no breakdown',
                    u.categories)
            WHEN t.n_streamless_device_events > 0
                THEN format('{} kernel/memcpy/memset events carry no stream arg, so none is device activity: no breakdown',
                    t.n_streamless_device_events)
            WHEN t.n_steps = 0 THEN 'no device events and no ProfilerStep: no breakdown'
            ELSE 'no device events, and no main thread with ProfilerStep activity: no breakdown'
        END AS reason
    FROM traces AS t
    LEFT JOIN measured AS m ON t.study = m.study AND t.run_id = m.run_id AND t.rank = m.rank
    LEFT JOIN unknown AS u ON t.content_hash = u.content_hash
),
run_ranks AS (
    -- a run with fewer rank traces than its world size is partial: its figures cover those ranks only
    SELECT
        study, run_id, world_size AS run_world_size, n_rank_traces AS run_rank_traces,
        CASE WHEN n_rank_traces < world_size THEN format(
            'partial run: traces of {} of its {} ranks; its step times and breakdowns cover those ranks only',
            n_rank_traces, world_size) END AS run_coverage
    FROM runs
)
SELECT
    r.study, r.run_id, r.rank, rule, step_windows, n_steps, n_device_events, n_streamless_device_events,
    unknown_categories, reason, run_world_size, run_rank_traces, run_coverage,
    -- what the ingest summary warns of: no breakdown, or one that leaves activity uncounted
    coalesce(
        reason,
        nullif(concat_ws('; ',
            CASE WHEN unknown_categories IS NOT NULL THEN
                'events of kinds tracehouse does not know are not counted as device activity: '
                || unknown_categories END,
            CASE WHEN n_streamless_device_events > 0 THEN format(
                '{} kernel/memcpy/memset events carry no stream arg and are not counted as device activity',
                n_streamless_device_events) END
        ), '') || format('; the breakdown uses the {} rule', rule)
    ) AS warning,
    n_ops, n_ops_with_shapes, n_ops_in_modules, n_op_launches, n_linked_launches, n_memory_events,
    n_ops_with_shapes > 0 AS has_shapes,
    n_ops_in_modules > 0 AS has_modules,
    n_memory_events > 0 AS has_memory,
    -- what the op-level views lack for this rank, one line; NULL when it lacks nothing
    CASE WHEN n_ops IS NULL THEN 'no op tables (ingested by an older tracehouse): re-ingest the trace'
    ELSE nullif(concat_ws('; ',
        CASE WHEN n_ops = 0 THEN 'no host ops (no cpu_op events)' END,
        CASE WHEN n_ops > 0 AND n_ops_with_shapes = 0 THEN 'no input shapes (profiled without record_shapes)' END,
        CASE WHEN n_ops > 0 AND n_ops_in_modules = 0 THEN 'no module paths (profiled without with_modules)' END,
        CASE WHEN n_op_launches > n_linked_launches THEN format('{} of {} GPU events not linked to a host op',
            n_op_launches - n_linked_launches, n_op_launches) END,
        CASE WHEN n_memory_events = 0 THEN 'no memory events (profiled without profile_memory)' END
    ), '') END AS op_gaps
FROM reasons AS r
JOIN run_ranks AS k ON r.study = k.study AND r.run_id = k.run_id;
