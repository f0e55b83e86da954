-- depends on: traces
-- One row per ProfilerStep#N annotation of a registered rank trace.
-- Parquet is the source of truth; only files registered in `traces` are shown, so the
-- partitions of an interrupted ingest stay invisible. hive_partitioning is off because every
-- key column is stored in the file itself (the folder names are for people and tools).
CREATE OR REPLACE VIEW steps AS
SELECT
    study,
    run_id,
    rank,
    content_hash,
    step,
    ts_unix_ns,
    dur_ns,
    pid,
    tid
FROM read_parquet('parquet/steps/**/*.parquet', union_by_name = true, hive_partitioning = false)
WHERE content_hash IN (SELECT content_hash FROM traces);
