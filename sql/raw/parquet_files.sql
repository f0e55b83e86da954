-- depends on: nothing
-- One row per registered Parquet partition file (relative to the warehouse directory).
CREATE TABLE IF NOT EXISTS parquet_files (
    path VARCHAR PRIMARY KEY,
    table_name VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL,  -- the source file (traces or power_files)
    n_rows BIGINT NOT NULL
);
