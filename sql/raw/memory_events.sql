-- depends on: traces
-- One row per `[memory]` instant event (profile_memory) of a registered rank trace: an
-- allocation (bytes > 0) or a free (bytes < 0), with the device's totals after it.
-- Parquet is the source of truth; only files registered in `traces` are shown, so the
-- partitions of an interrupted ingest stay invisible. hive_partitioning is off because every
-- key column is stored in the file itself (the folder names are for people and tools).
CREATE OR REPLACE VIEW memory_events AS
SELECT
    study,
    run_id,
    rank,
    content_hash,
    ts_unix_ns,
    pid,
    tid,
    device_type,
    device,
    addr,
    bytes,
    total_allocated,
    total_reserved
FROM read_parquet('parquet/memory_events/**/*.parquet', union_by_name = true, hive_partitioning = false)
WHERE content_hash IN (SELECT content_hash FROM traces);
