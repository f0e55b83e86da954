-- depends on: traces
-- One row per complete (ph X) event of a registered rank trace.
-- Parquet is the source of truth; only files registered in `traces` are shown, so the
-- partitions of an interrupted ingest stay invisible. hive_partitioning is off because every
-- key column is stored in the file itself (the folder names are for people and tools).
CREATE OR REPLACE VIEW events AS
SELECT
    study,
    run_id,
    rank,
    content_hash,
    kind,
    cat,
    name,
    ts_unix_ns,
    dur_ns,
    pid,
    tid,
    stream,
    device,
    correlation,
    external_id,
    launch_ts_unix_ns
FROM read_parquet('parquet/events/**/*.parquet', union_by_name = true, hive_partitioning = false)
WHERE content_hash IN (SELECT content_hash FROM traces);
