-- depends on: power_samples_raw
-- Every registered power sample (the public `power_samples`), copied out of Parquet into the
-- warehouse file. A TABLE, refreshed after every ingest, so that it and the energy views answer
-- in any DuckDB client from any working directory, and after the folder is moved.
CREATE OR REPLACE TABLE power_samples AS
SELECT
    study, run_id, content_hash, host, device, ts_unix_ns, power_w, energy_counter_j, temperature_c,
    gpu_util_pct, mem_used_mib, source, clock
FROM power_samples_raw;
