-- depends on: collectives_raw
-- Every registered collective call, copied out of Parquet into the warehouse file. A TABLE,
-- refreshed after every ingest: the public views over collectives then answer in any DuckDB
-- client from any working directory (the raw views' Parquet paths are relative to the
-- warehouse folder), and after the folder is moved.
CREATE OR REPLACE TABLE collective_calls AS
SELECT
    study, run_id, rank, content_hash, op, process_group, pg_desc, seq, bytes, dtype, group_size,
    ts_unix_ns, dur_ns, source, name, tid
FROM collectives_raw;
