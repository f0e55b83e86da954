-- depends on: collectives
-- Collective instances matched across the ranks of a run, one row per rank per instance.
-- Match key: (process group, seq) where every call of the group on every rank has a seq,
-- else (process group, order of appearance on each rank). A group whose call counts differ
-- between ranks is flagged (group_counts_differ); when it is matched by order of appearance
-- its instances get no timing figures (the pairing would be a guess).
-- transfer = min duration across ranks, wait = dur - transfer, skew = max - min start,
-- algbw = bytes / transfer, busbw = algbw x f (nccl-tests: 2(n-1)/n all_reduce; (n-1)/n
-- all_gather, reduce_scatter, all_to_all, gather, scatter; 1 broadcast, reduce, send, recv,
-- send_recv; NULL for other ops), n = group_size, else the number of ranks seen.
CREATE OR REPLACE VIEW collective_instances AS
WITH keyed AS (
    SELECT
        *,
        coalesce(process_group, '') AS group_key,
        row_number() OVER (
            PARTITION BY study, run_id, rank, coalesce(process_group, '')
            ORDER BY start_unix_ns, seq, end_unix_ns
        ) - 1 AS ordinal
    FROM collectives
),
group_facts AS (
    SELECT
        study, run_id, group_key,
        bool_and(all_seq) AS by_seq,
        min(n_calls) <> max(n_calls) AS group_counts_differ
    FROM (
        SELECT study, run_id, group_key, rank, count(*) AS n_calls, bool_and(seq IS NOT NULL) AS all_seq
        FROM keyed
        GROUP BY study, run_id, group_key, rank
    ) AS per_rank
    GROUP BY study, run_id, group_key
),
matched AS (
    SELECT
        k.*,
        f.group_counts_differ,
        CASE WHEN f.by_seq THEN 'seq' ELSE 'order' END AS matched_by,
        CASE WHEN f.by_seq THEN k.seq ELSE k.ordinal END AS instance_no,
        f.by_seq OR NOT f.group_counts_differ AS measurable
    FROM keyed AS k
    JOIN group_facts AS f ON k.study = f.study AND k.run_id = f.run_id AND k.group_key = f.group_key
),
instances AS (
    SELECT
        study, run_id, group_key, instance_no,
        count(DISTINCT rank) AS n_ranks,
        min(dur_us) AS transfer_us,
        (max(start_unix_ns) - min(start_unix_ns)) / 1000.0 AS skew_us,
        max(bytes) AS instance_bytes,
        coalesce(max(group_size), count(DISTINCT rank)) AS n
    FROM matched
    WHERE measurable
    GROUP BY study, run_id, group_key, instance_no
),
bandwidth AS (
    SELECT
        *,
        CASE WHEN transfer_us > 0 THEN instance_bytes / transfer_us / 1000.0 END AS algbw_gbps
    FROM instances
),
joined AS (
    SELECT
        m.*,
        b.n_ranks, b.transfer_us, b.skew_us, b.algbw_gbps,
        m.dur_us - b.transfer_us AS wait_us,
        b.algbw_gbps * CASE
            WHEN m.op = 'all_reduce' THEN 2.0 * (b.n - 1) / b.n
            WHEN m.op IN ('all_gather', 'reduce_scatter', 'all_to_all', 'gather', 'scatter')
                THEN 1.0 * (b.n - 1) / b.n
            WHEN m.op IN ('broadcast', 'reduce', 'send', 'recv', 'send_recv') THEN 1.0
        END AS busbw_gbps
    FROM matched AS m
    LEFT JOIN bandwidth AS b
        ON m.study = b.study AND m.run_id = b.run_id AND m.group_key = b.group_key
        AND m.instance_no = b.instance_no
)
SELECT
    study, run_id, rank, process_group, pg_desc, seq, op, bytes, dtype, group_size,
    start_unix_ns, dur_us, end_unix_ns, source, name,
    instance_no, matched_by, group_counts_differ, n_ranks,
    transfer_us, wait_us, skew_us, algbw_gbps, busbw_gbps
FROM joined;
