-- Device activity on GPU traces, one row per GPU event, classified compute / comm / memory.
-- Memory is decided by kind (category) before any name test, so a memcpy is never comm.
-- A TABLE, refreshed by the warehouse after every ingest that changed its inputs (raw events,
-- comm_kernel_patterns): every breakdown relation reads it several times, and scanning the
-- whole events Parquet each time was most of their cost.
CREATE OR REPLACE TABLE gpu_events AS
WITH device_events AS (
    SELECT
        study, run_id, rank, kind, name, stream, device,
        ts_unix_ns AS start_ns,
        ts_unix_ns + dur_ns AS end_ns,
        launch_ts_unix_ns AS launch_ns,
        lower(name) AS lname
    FROM events
    WHERE kind IN ('kernel', 'memcpy', 'memset')
      AND stream IS NOT NULL
      AND dur_ns >= 0
),
user_comm_names AS (
    -- decided once per distinct name: the user pattern table is tiny, names repeat a lot
    SELECT DISTINCT d.name
    FROM (SELECT DISTINCT name FROM device_events) AS d
    JOIN comm_kernel_patterns AS p ON d.name ILIKE p.pattern
),
classified AS (
    SELECT
        d.*,
        CASE
            WHEN d.kind IN ('memcpy', 'memset') THEN 'memory'
            WHEN d.lname LIKE 'nccl%' OR d.lname LIKE 'rccl%' OR d.lname LIKE 'hccl%'
                OR d.lname LIKE '%ncclkernel%' OR d.lname LIKE '%nccldevkernel%' THEN 'comm'
            WHEN u.name IS NOT NULL THEN 'comm'
            ELSE 'compute'
        END AS class
    FROM device_events AS d
    LEFT JOIN user_comm_names AS u ON d.name = u.name
)
SELECT study, run_id, rank, class, kind, name, stream, device, start_ns, end_ns, launch_ns
FROM classified;
