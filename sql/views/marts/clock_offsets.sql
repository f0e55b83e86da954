-- depends on: collective_instances, traces
-- Estimated clock offset of each host against the run's reference host (the host of its
-- lowest rank): matched collective instances end at nearly the same moment on every rank, so
-- the median over instances of (host's end - reference host's end) estimates the offset.
-- No stored timestamp is shifted by it; the projection applies it to collective arrivals only.
CREATE OR REPLACE VIEW clock_offsets AS
WITH located AS (
    SELECT c.study, c.run_id, c.process_group, c.instance_no, t.host, c.rank, c.end_unix_ns
    FROM collective_instances AS c
    JOIN traces AS t ON c.study = t.study AND c.run_id = t.run_id AND c.rank = t.rank
    WHERE c.transfer_us IS NOT NULL AND t.host IS NOT NULL
),
host_ends AS (
    SELECT study, run_id, process_group, instance_no, host, median(end_unix_ns) AS end_ns
    FROM located
    GROUP BY study, run_id, process_group, instance_no, host
),
reference AS (
    SELECT study, run_id, arg_min(host, rank) AS ref_host
    FROM located
    GROUP BY study, run_id
),
paired AS (
    SELECT h.study, h.run_id, h.host, r.ref_host, h.end_ns - x.end_ns AS diff_ns
    FROM host_ends AS h
    JOIN reference AS r ON h.study = r.study AND h.run_id = r.run_id
    JOIN host_ends AS x
        ON x.study = h.study AND x.run_id = h.run_id AND x.host = r.ref_host
        AND x.process_group IS NOT DISTINCT FROM h.process_group AND x.instance_no = h.instance_no
)
SELECT
    study, run_id, host, ref_host,
    count(*) AS n_instances,
    median(diff_ns) / 1000.0 AS offset_us,
    (quantile_cont(diff_ns, 0.9) - quantile_cont(diff_ns, 0.1)) / 1000.0 AS spread_p10_p90_us
FROM paired
GROUP BY study, run_id, host, ref_host;
