-- depends on: op_calls_raw
-- One row per host cpu_op call of a registered rank trace: op_calls_raw's rows (the rules are
-- there), kept in the DuckDB file so that the public views over them (op_breakdown,
-- module_breakdown, run_diff) read no Parquet and answer from any working directory. A TABLE,
-- refreshed by the warehouse after ingest: a copy of the runs' rows that the tasks computed.
CREATE OR REPLACE TABLE op_calls AS
SELECT
    study, run_id, rank, gpu_rank, on_timeline, step, op_id, name, module, phase, self_ns,
    device_ns, device_events, flops, counted_flops, counted_bytes, dtype
FROM op_calls_raw
