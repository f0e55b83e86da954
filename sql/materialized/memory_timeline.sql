-- depends on: memory_events, steps
-- The allocator's levels over time, one row per `[memory]` event of a rank trace (profile_memory):
-- the signed change and the device's allocated and reserved bytes after it, as Kineto writes them,
-- with the host step holding it (the rank's ProfilerStep span on its loop thread containing the
-- instant; NULL between or outside steps). Memory events are host instants, so steps are the
-- host's. A TABLE, refreshed after every ingest, so it answers from any client and directory.
-- net_bytes: the running sum of the changes on the device from the trace's first memory event
-- (events at the same instant all count at once), defined also where Kineto wrote no totals
-- (traces before PyTorch 1.10); it starts from 0, not from what was allocated before profiling.
-- device_kind: c10's DeviceType 0 is the CPU, 1 CUDA (HIP devices also report 1).
CREATE OR REPLACE TABLE memory_timeline AS
WITH located AS (
    SELECT
        m.study, m.run_id, m.rank, m.device_type, m.device, m.ts_unix_ns, m.bytes,
        m.total_allocated, m.total_reserved,
        s.step, s.ts_unix_ns + s.dur_ns AS step_end_ns
    FROM memory_events AS m
    ASOF LEFT JOIN steps AS s
        ON m.study = s.study AND m.run_id = s.run_id AND m.rank = s.rank AND m.ts_unix_ns >= s.ts_unix_ns
)
SELECT
    study,
    run_id,
    rank,
    CASE device_type WHEN 0 THEN 'cpu' WHEN 1 THEN 'gpu' ELSE 'other' END AS device_kind,
    device_type,
    device,
    ts_unix_ns,
    CASE WHEN ts_unix_ns < step_end_ns THEN step END AS step,
    bytes,
    CAST(sum(bytes) OVER (PARTITION BY study, run_id, rank, device_type, device ORDER BY ts_unix_ns) AS BIGINT)
        AS net_bytes,
    total_allocated AS allocated_bytes,
    total_reserved AS reserved_bytes
FROM located;
