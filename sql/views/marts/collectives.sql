-- depends on: collective_calls
-- One row per collective call per rank (METHODOLOGY "Collectives"), start on the absolute clock.
CREATE OR REPLACE VIEW collectives AS
SELECT
    study, run_id, rank, process_group, pg_desc, seq, op, bytes, dtype, group_size,
    ts_unix_ns AS start_unix_ns,
    dur_ns / 1000.0 AS dur_us,
    ts_unix_ns + dur_ns AS end_unix_ns,
    source, name
FROM collective_calls
WHERE dur_ns >= 0;
