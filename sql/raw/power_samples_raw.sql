-- depends on: power_files
-- One row per power sample of a registered power log (the public `power_samples` is the
-- materialized copy of this view, see sql/materialized/power_samples.sql).
-- Parquet is the source of truth; only files registered in `power_files` are shown, so the
-- partitions of an interrupted ingest stay invisible. hive_partitioning is off because every
-- key column is stored in the file itself (the folder names are for people and tools).
CREATE OR REPLACE VIEW power_samples_raw AS
SELECT
    study,
    run_id,
    content_hash,
    host,
    device,
    ts_unix_ns,
    power_w,
    energy_counter_j,
    temperature_c,
    gpu_util_pct,
    mem_used_mib,
    source,
    clock
FROM read_parquet('parquet/power_samples/**/*.parquet', union_by_name = true, hive_partitioning = false)
WHERE content_hash IN (SELECT content_hash FROM power_files);
