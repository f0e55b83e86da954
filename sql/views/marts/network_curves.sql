-- depends on: network_curve_points, collective_instances, runs, traces
-- Calibration points of the network, one row per point: every size and placement of every
-- ingested nccl-tests file (source 'nccl-tests'), and every measured collective instance of the
-- traced runs (source 'trace': one row per instance, however many ranks took part; its time is
-- transfer_us, the fastest rank's duration; ranks the group size, else the ranks seen; op the
-- ranks' op, send_recv for a point-to-point pair (send on one rank, recv on the other), NULL
-- when the ranks disagree otherwise). nodes is where the group sits, from its ranks' hosts: the
-- distinct hosts of the ranks seen when every one has a host and every member was seen, else the
-- run's nodes when the run has one node or the group spans the whole world, else NULL (never
-- guessed from the group's size: a strided group of two ranks may span two nodes);
-- ranks_per_node the most ranks of the group on one host.
CREATE OR REPLACE VIEW network_curves AS
WITH measured AS (
    SELECT
        'nccl-tests' AS source,
        study,
        CAST(NULL AS VARCHAR) AS run_id,
        op, dtype, ranks, nodes,
        CASE WHEN nodes > 0 AND ranks % nodes = 0 THEN CAST(ranks // nodes AS INTEGER) END AS ranks_per_node,
        bytes, time_us, algbw_gbps, busbw_gbps, in_place,
        program, path,
        CAST(NULL AS VARCHAR) AS process_group,
        CAST(NULL AS BIGINT) AS instance_no
    FROM network_curve_points
),
hosted AS (
    SELECT c.*, t.host
    FROM collective_instances AS c
    LEFT JOIN traces AS t ON c.study = t.study AND c.run_id = t.run_id AND c.rank = t.rank
    WHERE c.transfer_us IS NOT NULL
),
per_host AS (
    SELECT study, run_id, process_group, instance_no, host, count(*) AS ranks_on_host
    FROM hosted
    GROUP BY study, run_id, process_group, instance_no, host
),
placed AS (
    SELECT
        study, run_id, process_group, instance_no,
        CAST(count(*) FILTER (WHERE host IS NOT NULL) AS INTEGER) AS host_count,
        bool_or(host IS NULL) AS host_missing,
        CAST(sum(ranks_on_host) AS INTEGER) AS ranks_seen,
        CAST(max(ranks_on_host) AS INTEGER) AS most_on_host
    FROM per_host
    GROUP BY study, run_id, process_group, instance_no
),
instances AS (
    SELECT
        study, run_id, process_group, instance_no,
        CASE
            WHEN count(DISTINCT op) = 1 THEN min(op)
            WHEN count(DISTINCT op) = 2 AND bool_and(op IN ('send', 'recv')) THEN 'send_recv'
        END AS op,
        min(dtype) AS dtype,
        CAST(coalesce(max(group_size), max(n_ranks)) AS INTEGER) AS ranks,
        max(bytes) AS bytes,
        min(transfer_us) AS time_us,
        min(algbw_gbps) AS algbw_gbps,
        min(busbw_gbps) AS busbw_gbps
    FROM hosted
    GROUP BY study, run_id, process_group, instance_no
),
traced AS (
    SELECT
        'trace' AS source,
        i.study,
        i.run_id,
        i.op, i.dtype, i.ranks,
        CASE
            WHEN NOT p.host_missing AND p.ranks_seen = i.ranks THEN p.host_count
            WHEN r.nodes = 1 OR i.ranks = r.world_size THEN r.nodes
        END AS nodes,
        CASE
            WHEN NOT p.host_missing AND p.ranks_seen = i.ranks THEN p.most_on_host
            WHEN r.nodes = 1 THEN i.ranks
            WHEN i.ranks = r.world_size AND r.nodes > 0 AND i.ranks % r.nodes = 0
                THEN CAST(i.ranks // r.nodes AS INTEGER)
        END AS ranks_per_node,
        i.bytes, i.time_us, i.algbw_gbps, i.busbw_gbps,
        CAST(NULL AS BOOLEAN) AS in_place,
        CAST(NULL AS VARCHAR) AS program,
        CAST(NULL AS VARCHAR) AS path,
        i.process_group,
        i.instance_no
    FROM instances AS i
    JOIN placed AS p USING (study, run_id, process_group, instance_no)
    LEFT JOIN runs AS r ON i.study = r.study AND i.run_id = r.run_id
),
points AS (
    SELECT * FROM measured
    UNION ALL
    SELECT * FROM traced
)
SELECT
    source, study, run_id, op, dtype, ranks, nodes, ranks_per_node, bytes, time_us, algbw_gbps, busbw_gbps, in_place,
    program, path, process_group, instance_no
FROM points;
