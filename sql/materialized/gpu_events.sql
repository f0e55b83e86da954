-- depends on: events, comm_vocabulary, comm_kernel_patterns
-- Device activity on GPU traces, one row per GPU event, classified compute / comm / memory.
-- Memory is decided by kind (category) before any name test, so a memcpy is never comm.
-- Communication kernels: names comm_vocabulary's kernel patterns match (kernel_prefix,
-- kernel_substring, on the lowercased name) or a user ILIKE pattern of comm_kernel_patterns.
-- correlation: the event's, so comm_intervals finds the launching runtime calls without a second
-- scan of the events.
-- A TABLE, refreshed by the warehouse after every ingest that changed its inputs (raw events,
-- comm_vocabulary, comm_kernel_patterns): every breakdown relation reads it several times, and
-- scanning the whole events Parquet each time was most of their cost.
CREATE OR REPLACE TABLE gpu_events AS
WITH device_events AS (
    SELECT
        study, run_id, rank, kind, name, stream, device,
        ts_unix_ns AS start_ns,
        ts_unix_ns + dur_ns AS end_ns,
        launch_ts_unix_ns AS launch_ns,
        correlation
    FROM events
    WHERE kind IN ('kernel', 'memcpy', 'memset')
      AND stream IS NOT NULL
      AND dur_ns >= 0
),
device_names AS (
    SELECT DISTINCT name, lower(name) AS lname FROM device_events
),
comm_names AS (
    -- decided once per distinct name: the pattern tables are tiny, names repeat a lot
    SELECT n.name
    FROM device_names AS n
    JOIN comm_vocabulary AS v
        ON (v.kind = 'kernel_prefix' AND starts_with(n.lname, v.pattern))
        OR (v.kind = 'kernel_substring' AND contains(n.lname, v.pattern))
    UNION
    SELECT n.name
    FROM device_names AS n
    JOIN comm_kernel_patterns AS p ON n.name ILIKE p.pattern
),
classified AS (
    SELECT
        d.*,
        CASE
            WHEN d.kind IN ('memcpy', 'memset') THEN 'memory'
            WHEN c.name IS NOT NULL THEN 'comm'
            ELSE 'compute'
        END AS class
    FROM device_events AS d
    LEFT JOIN comm_names AS c ON d.name = c.name
)
SELECT study, run_id, rank, class, kind, name, stream, device, start_ns, end_ns, launch_ns, correlation
FROM classified;
