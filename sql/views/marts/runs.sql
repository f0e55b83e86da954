-- depends on: run_manifests, traces
-- One row per run: the manifest's facts; runs with traces but no manifest still appear, their
-- world size from the traces (distributedInfo, else the number of ranks), model facts NULL.
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
)
SELECT
    coalesce(m.study, t.study) AS study,
    coalesce(m.run_id, t.run_id) AS run_id,
    m.model,
    m.strategy,
    CAST(coalesce(m.world_size, t.world_size) AS INTEGER) AS world_size,
    CAST(coalesce(m.nodes, t.n_hosts) AS INTEGER) AS nodes,
    m.devices_per_node,
    m.dp, m.tp, m.pp,
    m.device_type,
    coalesce(m.device_name, t.device_name) AS device_name,
    m.dtype,
    m.n_params,
    m.global_batch,
    m.seq_len,
    m.tokens_per_step,
    m.flops_per_token,
    m.peak_flops,
    m.status,
    coalesce(t.n_ranks, 0) AS n_rank_traces
FROM manifested AS m
FULL OUTER JOIN traced AS t ON m.study = t.study AND m.run_id = t.run_id;
