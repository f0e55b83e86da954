-- depends on: traces, parquet_files
-- op_calls rows (same columns) of the registered traces that have no op_calls partition of the
-- current formulas: traces ingested by an older tracehouse, or costed by other formulas (a
-- digest of pipeline/ops). Computed in Python from each such trace's stored ops, op_launches and
-- steps partitions (read as its registered files, not through the views) by the one
-- implementation the ingest tasks use (pipeline/ops/calls.py), right after this
-- file runs and after every ingest (pipeline/ops/store.py, sql_runner.FILLED). Rows of traces no
-- longer registered or of other formulas are dropped. Empty in a warehouse whose traces were all
-- ingested by this version.
CREATE TABLE IF NOT EXISTS op_calls_healed (
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    rank INTEGER,
    content_hash VARCHAR NOT NULL,  -- the trace
    gpu_rank BOOLEAN,
    on_timeline BOOLEAN,
    step BIGINT,
    op_id BIGINT NOT NULL,
    name VARCHAR,
    module VARCHAR,
    phase VARCHAR,
    self_ns BIGINT,
    device_ns BIGINT,
    device_events BIGINT,
    flops BIGINT,
    counted_flops BIGINT,
    counted_bytes BIGINT,
    dtype VARCHAR,
    formulas_version VARCHAR NOT NULL
);
