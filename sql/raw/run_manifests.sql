-- depends on: nothing
-- One row per run: every RunManifest field (nested ones as JSON text), plus where it came from.
-- origin is 'file' for a manifest.json, 'command-line' for a run stated only by --study/--run.
CREATE TABLE IF NOT EXISTS run_manifests (
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    model VARCHAR,
    model_config VARCHAR,  -- JSON object
    n_params BIGINT,
    flops_per_token DOUBLE,
    global_batch BIGINT,
    seq_len BIGINT,
    tokens_per_step BIGINT,
    strategy VARCHAR,
    dp INTEGER,
    tp INTEGER,
    pp INTEGER,
    world_size INTEGER,
    nodes INTEGER,
    devices_per_node INTEGER,
    device_type VARCHAR,
    device_name VARCHAR,
    dtype VARCHAR,
    peak_flops DOUBLE,
    torch_version VARCHAR,
    nccl_version VARCHAR,
    cuda_version VARCHAR,
    hosts VARCHAR,  -- JSON array
    started_at VARCHAR,  -- ISO-8601 UTC as written
    ended_at VARCHAR,
    git_commit VARCHAR,
    command VARCHAR,  -- JSON array
    traces VARCHAR,  -- JSON object: rank -> file name
    power VARCHAR,  -- JSON object: source, unavailable_reason, files, interval_ms
    status VARCHAR,
    failure VARCHAR,
    manifest_version INTEGER,
    origin VARCHAR NOT NULL,
    manifest_path VARCHAR,
    manifest_hash VARCHAR,
    ingested_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (study, run_id)
);
ALTER TABLE run_manifests ADD COLUMN IF NOT EXISTS fsdp_units VARCHAR;  -- JSON object: FSDP unit -> parameters
ALTER TABLE run_manifests ADD COLUMN IF NOT EXISTS node_devices INTEGER;  -- devices each node has (devices_per_node: used)
