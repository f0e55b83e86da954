-- depends on: runs, traces, critical_path_segments
-- The stored critical paths (`tracehouse project` stores them) of every run of the warehouse: per
-- step, the segments that set the slowest rank's replayed window, in order. A run without a
-- current path shows one row with NULL segment columns and its reason: not computed yet, its
-- traces changed since the path was computed (stale: its rows are hidden; the digest of its
-- traces' content hashes differs), or why it cannot be replayed. Never a run silently absent.
CREATE OR REPLACE VIEW critical_path AS
WITH ingested AS (  -- the same digest as critical_rows.TRACES_DIGEST
    SELECT study, run_id, md5(string_agg(content_hash, ',' ORDER BY content_hash)) AS traces_digest
    FROM traces GROUP BY study, run_id
),
computed AS (
    SELECT study, run_id, any_value(traces_digest) AS traces_digest
    FROM critical_path_segments GROUP BY study, run_id
),
state AS (
    SELECT
        r.study, r.run_id,
        CASE
            WHEN c.run_id IS NULL THEN
                concat('not computed yet: run `tracehouse project --study ', r.study,
                       ' --world-sizes N` (it stores the critical paths of the runs it replays)')
            WHEN c.traces_digest IS DISTINCT FROM i.traces_digest THEN
                concat('stale: the run''s traces changed since its path was computed; run ',
                       '`tracehouse project --study ', r.study, ' --world-sizes N`')
        END AS missing
    FROM runs AS r
    LEFT JOIN computed AS c ON c.study = r.study AND c.run_id = r.run_id
    LEFT JOIN ingested AS i ON i.study = r.study AND i.run_id = r.run_id
)
SELECT
    s.study, s.run_id, p.step, p.path_rank, p.step_us, p.seq, p.rank, p.kind, p.op, p.start_us, p.dur_us,
    coalesce(s.missing, p.reason) AS reason
FROM state AS s
LEFT JOIN critical_path_segments AS p
    ON p.study = s.study AND p.run_id = s.run_id AND s.missing IS NULL
