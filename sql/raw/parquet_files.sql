-- depends on: nothing
-- One row per registered Parquet partition file (relative to the warehouse directory).
CREATE TABLE IF NOT EXISTS parquet_files (
    path VARCHAR PRIMARY KEY,
    table_name VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL,  -- the source file (traces or power_files)
    n_rows BIGINT NOT NULL,
    size_bytes BIGINT,  -- the file's size as written (NULL: registered by an older tracehouse)
    crc32 BIGINT  -- zlib CRC-32 of the file's bytes as written (NULL: registered by an older tracehouse)
);
-- Warehouses made before these columns existed gain them (NULL for the partitions already there).
ALTER TABLE parquet_files ADD COLUMN IF NOT EXISTS size_bytes BIGINT;
ALTER TABLE parquet_files ADD COLUMN IF NOT EXISTS crc32 BIGINT;
