-- depends on: traces
-- One row per (pid, tid) naming event of a registered rank trace.
-- Parquet is the source of truth; only files registered in `traces` are shown, so the
-- partitions of an interrupted ingest stay invisible. hive_partitioning is off because every
-- key column is stored in the file itself (the folder names are for people and tools).
CREATE OR REPLACE VIEW threads AS
SELECT
    study,
    run_id,
    rank,
    content_hash,
    pid,
    tid,
    thread_name,
    process_name
FROM read_parquet('parquet/threads/**/*.parquet', union_by_name = true, hive_partitioning = false)
WHERE content_hash IN (SELECT content_hash FROM traces);
