-- depends on: traces
-- One row per collective call per rank, as the trace shows it (the public view is `collectives`).
-- Parquet is the source of truth; only files registered in `traces` are shown, so the
-- partitions of an interrupted ingest stay invisible. hive_partitioning is off because every
-- key column is stored in the file itself (the folder names are for people and tools).
CREATE OR REPLACE VIEW collectives_raw AS
SELECT
    study,
    run_id,
    rank,
    content_hash,
    op,
    process_group,
    pg_desc,
    seq,
    bytes,
    dtype,
    group_size,
    ts_unix_ns,
    dur_ns,
    source,
    name,
    tid
FROM read_parquet('parquet/collectives/**/*.parquet', union_by_name = true, hive_partitioning = false)
WHERE content_hash IN (SELECT content_hash FROM traces);
