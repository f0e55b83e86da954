-- depends on: traces
-- One row per GPU event (kernel, memcpy, memset) of a registered rank trace, linked to the host
-- op that launched it (through its runtime call's correlation) and, for backward kernels, the forward op.
-- Parquet is the source of truth; only files registered in `traces` are shown, so the
-- partitions of an interrupted ingest stay invisible. hive_partitioning is off because every
-- key column is stored in the file itself (the folder names are for people and tools).
CREATE OR REPLACE VIEW op_launches AS
SELECT
    study,
    run_id,
    rank,
    content_hash,
    event_id,
    kind,
    name,
    ts_unix_ns,
    dur_ns,
    stream,
    correlation,
    op_id,
    fwd_op_id,
    module
FROM read_parquet('parquet/op_launches/**/*.parquet', union_by_name = true, hive_partitioning = false)
WHERE content_hash IN (SELECT content_hash FROM traces);
