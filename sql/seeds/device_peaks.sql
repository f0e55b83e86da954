-- depends on: nothing
-- Peak dense FLOP/s per device and dtype, the denominator of MFU for a run whose manifest states
-- none, and the device's peak memory bandwidth (repeated on each dtype's row), the slope of the
-- roofline: defined once in tracehouse.pipeline.common.hardware (PEAK_FLOPS), which the collectors
-- use too; the warehouse rewrites these rows from it whenever it creates the relations. A device
-- name matches the first key (lowest match_order) it contains, case-insensitively, as Kineto
-- writes it ("NVIDIA H100 80GB HBM3" is an H100, "AMD Instinct MI300X" an MI300X).
CREATE TABLE IF NOT EXISTS device_peaks (
    match_order INTEGER NOT NULL,
    device_key VARCHAR NOT NULL,
    dtype VARCHAR NOT NULL,
    peak_flops DOUBLE NOT NULL,  -- FLOP/s per device
    peak_bytes_per_s DOUBLE,  -- memory bandwidth per device
    PRIMARY KEY (device_key, dtype)
);
-- A warehouse made before the bandwidth column gains it (the rows are rewritten right after).
ALTER TABLE device_peaks ADD COLUMN IF NOT EXISTS peak_bytes_per_s DOUBLE;
