-- depends on: events, gpu_events, cpu_main_threads, comm_vocabulary, collective_instances, steps, threads
-- Every communication interval of every rank (METHODOLOGY "Why the step waits"), one row each,
-- with the collective behind it and the phase that issued it. GPU ranks: the comm-class GPU
-- events (the same rows as gpu_events); CPU-only ranks: the comm spans (comm_vocabulary
-- comm_span_prefix: gloo:*) on any thread, as device_intervals counts them.
-- The collective: the parser's collectives row of the same event (GPU: source nccl_kernel, whose
-- fields come from the kernel's args, else the record_param_comms / nccl:* op holding its launch;
-- CPU: source gloo, fields from the tracehouse label), joined through collective_instances for
-- the matched instance's transfer time (NULL when unmatched, or not seen on every rank of its
-- group, at least two); events with equal rank, start,
-- end and name pair up in order. Unknown fields stay NULL.
-- The issuing host context (place): GPU: the earliest runtime call with the kernel's
-- correlation (NULL phase when the launch is not in the trace); CPU: the tracehouse label of the
-- same (process group, seq) on this rank, else the span's own start on the main thread.
-- phase: optimizer inside an Optimizer.step#* / Optimizer.zero_grad#* event of the place's
-- thread; backward inside an autograd::engine::evaluate_function:* event there, or inside one of
-- the backward annotations PyTorch's own schedules record outside any evaluate_function (FSDP2's
-- FSDP::post_backward* / FSDP::root_post_backward*, pipelining's `Backward <i>`), or on an autograd
-- engine thread (named pt_autograd_*); forward inside a ProfilerStep# window of the rank; else other.
-- "Inside" is [start, end) and any of several nested events counts: per thread that issued an
-- interval and per context, a running maximum of the context events' ends, then an ASOF join.
-- A TABLE, refreshed after every ingest: the public views must not read the Parquet events.
CREATE OR REPLACE TABLE comm_intervals AS
WITH comm_names AS (
    SELECT DISTINCT name FROM gpu_events WHERE class = 'comm'
),
comm_correlations AS (
    SELECT DISTINCT correlation FROM gpu_events WHERE class = 'comm' AND correlation IS NOT NULL
),
named AS MATERIALIZED (
    -- one pass over the events for every named event this table reads: the comm kernels, the
    -- comm spans, the labels, the phase context events (reading names is the costly part) and
    -- the runtime calls that may launch a comm kernel (a superset: any rank's comm correlation)
    SELECT study, run_id, rank, kind, name, ts_unix_ns, dur_ns, pid, tid, stream, correlation
    FROM events
    WHERE (kind = 'kernel' AND stream IS NOT NULL AND dur_ns >= 0 AND name IN (SELECT name FROM comm_names))
        OR (kind = 'runtime' AND correlation IN (SELECT correlation FROM comm_correlations))
        OR starts_with(name, 'tracehouse.collective|')
        -- prefixes sharing a start are tested under it: most names then fail fewer tests
        OR (starts_with(name, 'Optimizer.') AND (
            starts_with(name, 'Optimizer.step#') OR starts_with(name, 'Optimizer.zero_grad#')
        ))
        OR starts_with(name, 'autograd::engine::evaluate_function:')
        OR (starts_with(name, 'FSDP::') AND (
            starts_with(name, 'FSDP::post_backward') OR starts_with(name, 'FSDP::root_post_backward')
        ))
        OR starts_with(name, 'Backward ')  -- `Backward <i>`, matched exactly below (a regexp here is slow)
        -- comm_vocabulary's comm_span_prefix, spelled out: a join to it here costs more than all
        -- the rest of this table (tests/analysis/test_analysis_wait_attribution.py checks the copy)
        OR starts_with(name, 'gloo:')
),
gpu_comm AS MATERIALIZED (
    SELECT
        e.study, e.run_id, e.rank, 'gpu' AS rule, e.name, e.ts_unix_ns AS start_ns,
        e.ts_unix_ns + e.dur_ns AS end_ns, e.stream, e.tid, e.correlation
    FROM named AS e
    SEMI JOIN comm_names AS c ON e.name = c.name
    WHERE e.kind = 'kernel' AND e.stream IS NOT NULL AND e.dur_ns >= 0
),
launches AS (
    SELECT
        r.study, r.run_id, r.rank, r.correlation,
        min(r.ts_unix_ns) AS launch_ns,
        arg_min(r.pid, r.ts_unix_ns) AS pid,
        arg_min(r.tid, r.ts_unix_ns) AS tid
    FROM named AS r
    SEMI JOIN gpu_comm AS g
        ON r.study = g.study AND r.run_id = g.run_id AND r.rank = g.rank AND r.correlation = g.correlation
    WHERE r.kind = 'runtime'
    GROUP BY r.study, r.run_id, r.rank, r.correlation
),
cpu_comm AS (
    SELECT
        e.study, e.run_id, e.rank, 'cpu' AS rule, e.name, e.ts_unix_ns AS start_ns,
        e.ts_unix_ns + e.dur_ns AS end_ns, CAST(NULL AS BIGINT) AS stream, e.tid,
        m.pid AS main_pid, m.tid AS main_tid
    FROM named AS e
    JOIN cpu_main_threads AS m ON e.study = m.study AND e.run_id = m.run_id AND e.rank = m.rank
    SEMI JOIN comm_vocabulary AS v ON v.kind = 'comm_span_prefix' AND starts_with(e.name, v.pattern)
    WHERE e.dur_ns >= 0
),
intervals AS (
    SELECT
        g.study, g.run_id, g.rank, g.rule, g.name, g.start_ns, g.end_ns, g.stream, g.tid,
        l.launch_ns AS place_ns, l.pid AS place_pid, l.tid AS place_tid, l.launch_ns,
        NULL AS main_pid, NULL AS main_tid
    FROM gpu_comm AS g
    LEFT JOIN launches AS l
        ON g.study = l.study AND g.run_id = l.run_id AND g.rank = l.rank AND g.correlation = l.correlation
    UNION ALL
    SELECT
        study, run_id, rank, rule, name, start_ns, end_ns, stream, tid,
        NULL, NULL, NULL, NULL, main_pid, main_tid
    FROM cpu_comm
),
numbered AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY study, run_id, rank, start_ns, end_ns, name ORDER BY stream, tid, place_ns
        ) AS nth_alike
    FROM intervals
),
calls AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY study, run_id, rank, start_unix_ns, end_unix_ns, name ORDER BY seq, process_group
        ) AS nth_alike
    FROM collective_instances
    WHERE source IN ('nccl_kernel', 'gloo')
),
attributed AS MATERIALIZED (
    SELECT
        i.*,
        c.op, c.process_group, c.pg_desc, c.seq, c.bytes, c.dtype, c.group_size,
        -- wait and transfer only for an instance seen on every rank of its group (two at least)
        CASE WHEN c.n_ranks >= greatest(2, coalesce(c.group_size, 0)) THEN
            CAST(round(c.transfer_us * 1000) AS BIGINT)
        END AS transfer_ns
    FROM numbered AS i
    LEFT JOIN calls AS c
        ON i.study = c.study AND i.run_id = c.run_id AND i.rank = c.rank AND i.start_ns = c.start_unix_ns
        AND i.end_ns = c.end_unix_ns AND i.name = c.name AND i.nth_alike = c.nth_alike
),
labels AS (
    SELECT
        study, run_id, rank,
        regexp_extract(name, '\|pg=([^|]*)', 1) AS process_group,
        TRY_CAST(regexp_extract(name, '\|seq=([^|]*)', 1) AS BIGINT) AS seq,
        min(ts_unix_ns) AS ts_unix_ns,
        arg_min(pid, ts_unix_ns) AS pid,
        arg_min(tid, ts_unix_ns) AS tid
    FROM named
    WHERE starts_with(name, 'tracehouse.collective|')
    GROUP BY ALL
),
placed AS MATERIALIZED (
    SELECT
        a.* EXCLUDE (place_ns, place_pid, place_tid, main_pid, main_tid),
        CASE WHEN a.rule = 'gpu' THEN a.place_ns ELSE coalesce(l.ts_unix_ns, a.start_ns) END AS place_ns,
        CASE WHEN a.rule = 'gpu' THEN a.place_pid WHEN l.ts_unix_ns IS NOT NULL THEN l.pid ELSE a.main_pid END
            AS place_pid,
        CASE WHEN a.rule = 'gpu' THEN a.place_tid WHEN l.ts_unix_ns IS NOT NULL THEN l.tid ELSE a.main_tid END
            AS place_tid
    FROM attributed AS a
    LEFT JOIN labels AS l
        ON a.rule = 'cpu' AND a.study = l.study AND a.run_id = l.run_id AND a.rank = l.rank
        AND a.process_group = l.process_group AND a.seq = l.seq
),
place_threads AS MATERIALIZED (
    -- an integer key per thread some interval was issued from: the window and the ASOF joins
    -- below then partition by one integer, not five text keys; context events on other threads
    -- are never looked up
    SELECT study, run_id, rank, place_pid AS pid, place_tid AS tid, CAST(row_number() OVER () AS INTEGER) AS thread_key
    FROM (SELECT DISTINCT study, run_id, rank, place_pid, place_tid FROM placed WHERE place_ns IS NOT NULL) AS t
),
contexts AS MATERIALIZED (
    -- context_key: the thread's key, twice, plus one for optimizer events. Events starting at
    -- the same instant share their reach (the window's default RANGE frame counts them all), so
    -- the ASOF join below may pick any of them
    SELECT
        2 * t.thread_key + CAST(starts_with(e.name, 'Optimizer.') AS INTEGER) AS context_key,
        e.ts_unix_ns AS start_ns,
        max(e.ts_unix_ns + e.dur_ns) OVER (
            PARTITION BY 2 * t.thread_key + CAST(starts_with(e.name, 'Optimizer.') AS INTEGER)
            ORDER BY e.ts_unix_ns
        ) AS reach_ns
    FROM named AS e
    JOIN place_threads AS t
        ON e.study = t.study AND e.run_id = t.run_id AND e.rank = t.rank AND e.pid = t.pid AND e.tid = t.tid
    WHERE (
        starts_with(e.name, 'Optimizer.step#') OR starts_with(e.name, 'Optimizer.zero_grad#')
        OR starts_with(e.name, 'autograd::engine::evaluate_function:')
        OR starts_with(e.name, 'FSDP::post_backward') OR starts_with(e.name, 'FSDP::root_post_backward')
        OR regexp_full_match(e.name, 'Backward [0-9]+')
    ) AND e.dur_ns > 0
),
placed_threads AS MATERIALIZED (
    SELECT p.*, t.thread_key
    FROM (SELECT DISTINCT study, run_id, rank, place_pid, place_tid, place_ns FROM placed) AS p
    JOIN place_threads AS t
        ON p.study = t.study AND p.run_id = t.run_id AND p.rank = t.rank AND p.place_pid = t.pid
        AND p.place_tid = t.tid
),
step_spans AS (
    SELECT study, run_id, rank, ts_unix_ns AS start_ns, max(ts_unix_ns + dur_ns) AS end_ns
    FROM steps
    WHERE dur_ns > 0
    GROUP BY ALL
),
step_reach AS (
    SELECT *, max(end_ns) OVER (PARTITION BY study, run_id, rank ORDER BY start_ns) AS reach_ns
    FROM step_spans
),
autograd_threads AS (
    SELECT DISTINCT study, run_id, rank, pid, tid FROM threads WHERE starts_with(thread_name, 'pt_autograd')
),
in_optimizer AS (
    SELECT p.study, p.run_id, p.rank, p.place_pid, p.place_tid, p.place_ns, c.reach_ns > p.place_ns AS inside
    FROM placed_threads AS p
    ASOF JOIN contexts AS c ON 2 * p.thread_key + 1 = c.context_key AND p.place_ns >= c.start_ns
),
in_backward AS (
    SELECT p.study, p.run_id, p.rank, p.place_pid, p.place_tid, p.place_ns, c.reach_ns > p.place_ns AS inside
    FROM placed_threads AS p
    ASOF JOIN contexts AS c ON 2 * p.thread_key = c.context_key AND p.place_ns >= c.start_ns
),
in_step AS (
    SELECT p.study, p.run_id, p.rank, p.place_ns, s.reach_ns > p.place_ns AS inside
    FROM (SELECT DISTINCT study, run_id, rank, place_ns FROM placed) AS p
    ASOF JOIN step_reach AS s ON p.study = s.study AND p.run_id = s.run_id AND p.rank = s.rank
        AND p.place_ns >= s.start_ns
),
phased AS (
    SELECT
        p.*,
        CASE
            WHEN p.place_ns IS NULL THEN NULL
            WHEN o.inside THEN 'optimizer'
            WHEN b.inside OR t.tid IS NOT NULL THEN 'backward'
            WHEN s.inside THEN 'forward'
            ELSE 'other'
        END AS phase
    FROM placed AS p
    LEFT JOIN in_optimizer AS o
        ON p.study = o.study AND p.run_id = o.run_id AND p.rank = o.rank AND p.place_pid = o.place_pid
        AND p.place_tid = o.place_tid AND p.place_ns = o.place_ns
    LEFT JOIN in_backward AS b
        ON p.study = b.study AND p.run_id = b.run_id AND p.rank = b.rank AND p.place_pid = b.place_pid
        AND p.place_tid = b.place_tid AND p.place_ns = b.place_ns
    LEFT JOIN autograd_threads AS t
        ON p.study = t.study AND p.run_id = t.run_id AND p.rank = t.rank AND p.place_pid = t.pid
        AND p.place_tid = t.tid
    LEFT JOIN in_step AS s
        ON p.study = s.study AND p.run_id = s.run_id AND p.rank = s.rank AND p.place_ns = s.place_ns
)
SELECT
    study, run_id, rank, rule,
    CAST(row_number() OVER (
        PARTITION BY study, run_id, rank ORDER BY start_ns, end_ns, name, stream, tid, seq
    ) AS BIGINT) AS interval_no,
    name, start_ns, end_ns, stream, tid, launch_ns, place_ns,
    op, process_group, pg_desc, seq, bytes, dtype, group_size, transfer_ns, phase
FROM phased;
