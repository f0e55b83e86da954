-- depends on: network_curve_points, collective_instances, runs
-- Calibration points of the network, one row per point: every size and placement of every
-- ingested nccl-tests file (source 'nccl-tests'), and every measured collective instance of the
-- traced runs (source 'trace': one row per instance, however many ranks took part; its time is
-- transfer_us, the fastest rank's duration; ranks the group size, else the ranks seen; nodes the
-- run's nodes when the group spans the whole world or the run has one node, else NULL; op the
-- ranks' op, send_recv for a point-to-point pair (send on one rank, recv on the other), NULL
-- when the ranks disagree otherwise).
CREATE OR REPLACE VIEW network_curves AS
WITH measured AS (
    SELECT
        'nccl-tests' AS source,
        study,
        CAST(NULL AS VARCHAR) AS run_id,
        op, dtype, ranks, nodes, bytes, time_us, algbw_gbps, busbw_gbps, in_place,
        program, path,
        CAST(NULL AS VARCHAR) AS process_group,
        CAST(NULL AS BIGINT) AS instance_no
    FROM network_curve_points
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
    FROM collective_instances
    WHERE transfer_us IS NOT NULL
    GROUP BY study, run_id, process_group, instance_no
),
traced AS (
    SELECT
        'trace' AS source,
        i.study,
        i.run_id,
        i.op, i.dtype, i.ranks,
        CASE WHEN r.nodes = 1 OR i.ranks = r.world_size THEN r.nodes END AS nodes,
        i.bytes, i.time_us, i.algbw_gbps, i.busbw_gbps,
        CAST(NULL AS BOOLEAN) AS in_place,
        CAST(NULL AS VARCHAR) AS program,
        CAST(NULL AS VARCHAR) AS path,
        i.process_group,
        i.instance_no
    FROM instances AS i
    LEFT JOIN runs AS r ON i.study = r.study AND i.run_id = r.run_id
),
points AS (
    SELECT * FROM measured
    UNION ALL
    SELECT * FROM traced
)
SELECT
    source, study, run_id, op, dtype, ranks, nodes, bytes, time_us, algbw_gbps, busbw_gbps, in_place,
    program, path, process_group, instance_no
FROM points;
