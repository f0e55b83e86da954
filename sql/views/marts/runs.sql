-- depends on: run_manifests, traces, device_peaks
-- One row per run: the manifest's facts; runs with traces but no manifest still appear, their
-- world size from the traces (distributedInfo, else the number of ranks), model facts NULL. A
-- run whose manifest states no peak FLOP/s takes it from device_peaks, by its device name and dtype.
CREATE OR REPLACE VIEW runs AS
WITH traced AS (
    SELECT
        study, run_id,
        coalesce(max(world_size), count(DISTINCT rank)) AS world_size,
        count(DISTINCT rank) AS n_ranks,
        nullif(count(DISTINCT host), 0) AS n_hosts,
        min(device_name) AS device_name
    FROM traces
    GROUP BY study, run_id
),
manifested AS (
    SELECT * FROM run_manifests
),
device_keys AS (
    SELECT DISTINCT match_order, device_key FROM device_peaks
),
named AS (
    SELECT
        coalesce(m.study, t.study) AS study,
        coalesce(m.run_id, t.run_id) AS run_id,
        coalesce(m.device_name, t.device_name) AS device_name,
        m.dtype
    FROM manifested AS m
    FULL OUTER JOIN traced AS t ON m.study = t.study AND m.run_id = t.run_id
),
table_peaks AS (
    -- the first key the device name contains decides, then the run's dtype picks the peak
    SELECT n.study, n.run_id, any_value(p.peak_flops) AS peak_flops
    FROM named AS n
    JOIN (
        SELECT n2.study, n2.run_id, arg_min(k.device_key, k.match_order) AS device_key
        FROM named AS n2
        JOIN device_keys AS k ON contains(lower(n2.device_name), lower(k.device_key))
        GROUP BY n2.study, n2.run_id
    ) AS best ON n.study = best.study AND n.run_id = best.run_id
    JOIN device_peaks AS p ON p.device_key = best.device_key AND p.dtype = n.dtype
    GROUP BY n.study, n.run_id
)
SELECT
    coalesce(m.study, t.study) AS study,
    coalesce(m.run_id, t.run_id) AS run_id,
    m.model,
    m.strategy,
    CAST(coalesce(m.world_size, t.world_size) AS INTEGER) AS world_size,
    CAST(coalesce(m.nodes, t.n_hosts) AS INTEGER) AS nodes,
    m.devices_per_node,
    m.node_devices,
    m.dp, m.tp, m.pp,
    m.device_type,
    coalesce(m.device_name, t.device_name) AS device_name,
    m.dtype,
    m.n_params,
    m.global_batch,
    m.seq_len,
    m.tokens_per_step,
    m.flops_per_token,
    coalesce(m.peak_flops, tp.peak_flops) AS peak_flops,
    m.status,
    coalesce(t.n_ranks, 0) AS n_rank_traces,
    CASE
        WHEN m.peak_flops IS NOT NULL THEN 'manifest'
        WHEN tp.peak_flops IS NOT NULL THEN 'device table'
    END AS peak_flops_source
FROM manifested AS m
FULL OUTER JOIN traced AS t ON m.study = t.study AND m.run_id = t.run_id
LEFT JOIN table_peaks AS tp
    ON tp.study = coalesce(m.study, t.study) AND tp.run_id = coalesce(m.run_id, t.run_id);
