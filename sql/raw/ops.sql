-- depends on: traces
-- One row per host op-tree event (cpu_op, python_function, user_annotation) of a registered rank
-- trace, with its parent in the per-thread call tree, its args as written and its nn.Module path.
-- Parquet is the source of truth; only files registered in `traces` are shown, so the
-- partitions of an interrupted ingest stay invisible. hive_partitioning is off because every
-- key column is stored in the file itself (the folder names are for people and tools).
CREATE OR REPLACE VIEW ops AS
SELECT
    study,
    run_id,
    rank,
    content_hash,
    op_id,
    parent_id,
    depth,
    kind,
    name,
    ts_unix_ns,
    dur_ns,
    pid,
    tid,
    external_id,
    sequence_number,
    fwd_thread_id,
    input_dims,
    input_types,
    concrete_inputs,
    module
FROM read_parquet('parquet/ops/**/*.parquet', union_by_name = true, hive_partitioning = false)
WHERE content_hash IN (SELECT content_hash FROM traces);
