-- depends on: memory_timeline, steps
-- Peak memory per step, rank and device: the most allocated and reserved bytes at any instant of
-- the rank's host step [start, end), i.e. the larger of the level the step starts with (after the
-- device's last memory event before the start) and the levels after each event inside it; the
-- same for net_bytes (memory_timeline), where the trace has no totals.
-- Every step of every rank has rows: a rank without memory events (profiled without
-- profile_memory) has one row per step with memory_events = 0, device_kind NULL and NULL bytes,
-- so the absence is stated, never an empty result (trace_coverage.has_memory says it per rank).
-- A TABLE, refreshed after every ingest (it reads the raw steps), so it answers from any client.
CREATE OR REPLACE TABLE step_memory AS
WITH devices AS (
    SELECT DISTINCT study, run_id, rank, device_kind, device_type, device FROM memory_timeline
),
rank_steps AS (
    SELECT
        s.study, s.run_id, s.rank, s.step, s.ts_unix_ns AS start_ns, s.ts_unix_ns + s.dur_ns AS end_ns,
        d.device_kind, d.device_type, d.device
    FROM steps AS s
    LEFT JOIN devices AS d ON s.study = d.study AND s.run_id = d.run_id AND s.rank = d.rank
    WHERE s.dur_ns >= 0
),
inside AS (
    SELECT
        study, run_id, rank, step, device_type, device,
        count(*) AS n_events,
        max(allocated_bytes) AS allocated_bytes,
        max(reserved_bytes) AS reserved_bytes,
        max(net_bytes) AS net_bytes
    FROM memory_timeline
    WHERE step IS NOT NULL
    GROUP BY study, run_id, rank, step, device_type, device
),
at_start AS (
    SELECT
        r.study, r.run_id, r.rank, r.step, r.device_type, r.device,
        m.allocated_bytes, m.reserved_bytes, m.net_bytes
    FROM rank_steps AS r
    ASOF JOIN memory_timeline AS m
        ON m.study = r.study AND m.run_id = r.run_id AND m.rank = r.rank
        AND m.device_type = r.device_type AND m.device = r.device AND r.start_ns > m.ts_unix_ns
)
SELECT
    r.study,
    r.run_id,
    r.rank,
    r.step,
    r.start_ns AS step_start_unix_ns,
    r.device_kind,
    r.device,
    coalesce(i.n_events, 0) AS memory_events,
    a.allocated_bytes AS start_allocated_bytes,
    greatest(a.allocated_bytes, i.allocated_bytes) AS peak_allocated_bytes,
    greatest(a.reserved_bytes, i.reserved_bytes) AS peak_reserved_bytes,
    greatest(a.net_bytes, i.net_bytes) AS peak_net_bytes
FROM rank_steps AS r
LEFT JOIN inside AS i
    ON r.study = i.study AND r.run_id = i.run_id AND r.rank = i.rank AND r.step = i.step
    AND r.device_type = i.device_type AND r.device = i.device
LEFT JOIN at_start AS a
    ON r.study = a.study AND r.run_id = a.run_id AND r.rank = a.rank AND r.step = a.step
    AND r.device_type = a.device_type AND r.device = a.device;
