-- depends on: traces
-- One row per process group in a registered trace's distributedInfo.pg_config.
-- Parquet is the source of truth; only files registered in `traces` are shown, so the
-- partitions of an interrupted ingest stay invisible. hive_partitioning is off because every
-- key column is stored in the file itself (the folder names are for people and tools).
CREATE OR REPLACE VIEW process_groups AS
SELECT
    study,
    run_id,
    rank,
    content_hash,
    process_group,
    pg_desc,
    backend_config,
    group_size,
    ranks
FROM read_parquet('parquet/process_groups/**/*.parquet', union_by_name = true, hive_partitioning = false)
WHERE content_hash IN (SELECT content_hash FROM traces);
