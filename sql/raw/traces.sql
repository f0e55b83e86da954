-- depends on: nothing
-- One row per ingested rank trace. Registering this row (together with the file's rows in
-- parquet_files, in one transaction) is what makes the file's Parquet partitions visible.
CREATE TABLE IF NOT EXISTS traces (
    content_hash VARCHAR PRIMARY KEY,  -- sha256 of the file's bytes
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    rank INTEGER NOT NULL,
    rank_source VARCHAR NOT NULL,  -- distributedInfo | manifest | option | single-process (its run's only trace, without distributedInfo: rank 0)
    path VARCHAR NOT NULL,  -- absolute path at ingest time
    size_bytes BIGINT NOT NULL,
    n_events BIGINT NOT NULL,
    n_steps BIGINT NOT NULL,
    n_collectives BIGINT NOT NULL,
    host VARCHAR,
    backend VARCHAR,
    world_size INTEGER,
    device_name VARCHAR,  -- first of device_names
    device_names VARCHAR,  -- JSON array of deviceProperties names
    base_time_ns BIGINT,
    ts_origin VARCHAR,  -- relative-base | absolute-epoch
    layout VARCHAR,  -- object | bare-array
    schema_version INTEGER,
    negative_dur_events BIGINT,  -- events with dur < 0, dropped by the parser
    first_ts_unix_ns BIGINT,  -- earliest event start
    last_ts_unix_ns BIGINT,  -- latest event end
    distributed_info_json VARCHAR,
    ingested_at TIMESTAMPTZ NOT NULL,
    decoder VARCHAR,  -- which decoder read the file: scanner (the C extension) | msgspec
    utf8_replaced BOOLEAN,  -- invalid UTF-8 in the file was replaced by U+FFFD
    n_device_events BIGINT,  -- kernel, memcpy and memset events with a stream: the GPU rule's input
    n_streamless_device_events BIGINT,  -- kernel, memcpy and memset events without a stream arg
    unknown_categories VARCHAR,  -- JSON object: event category tracehouse does not know -> events
    n_ops BIGINT,  -- rows in ops: host cpu_op, python_function and user_annotation events
    n_ops_with_shapes BIGINT,  -- ops with `Input Dims` (profiler record_shapes=True)
    n_ops_in_modules BIGINT,  -- ops inside an `nn.Module:` event (profiler with_modules=True)
    n_op_launches BIGINT,  -- rows in op_launches: kernel, memcpy and memset events
    n_linked_launches BIGINT,  -- op_launches rows linked to the op that launched them
    n_memory_events BIGINT,  -- rows in memory_events (profiler profile_memory=True)
    UNIQUE (study, run_id, rank)
);
-- Warehouses made before these columns existed gain them (NULL for the traces already there).
ALTER TABLE traces ADD COLUMN IF NOT EXISTS decoder VARCHAR;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS utf8_replaced BOOLEAN;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS n_device_events BIGINT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS n_streamless_device_events BIGINT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS unknown_categories VARCHAR;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS n_ops BIGINT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS n_ops_with_shapes BIGINT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS n_ops_in_modules BIGINT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS n_op_launches BIGINT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS n_linked_launches BIGINT;
ALTER TABLE traces ADD COLUMN IF NOT EXISTS n_memory_events BIGINT;
