-- depends on: nothing
-- One row per registered power log (keyed by content hash, like traces).
CREATE TABLE IF NOT EXISTS power_files (
    content_hash VARCHAR PRIMARY KEY,
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    path VARCHAR NOT NULL,
    size_bytes BIGINT NOT NULL,
    n_samples BIGINT NOT NULL,
    host VARCHAR,
    source VARCHAR,  -- nvml | dcgmi | nvidia-smi | dcgm-exporter
    first_ts_unix_ns BIGINT,
    last_ts_unix_ns BIGINT,
    ingested_at TIMESTAMPTZ NOT NULL
);
