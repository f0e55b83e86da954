-- depends on: nothing
-- One row per (run, step, rank, op) of a replayed step, written by `tracehouse project`
-- with critical_path_segments: how much one call of the op could grow before some rank's window
-- of the step grows (docs/projection.md "Critical path").
CREATE TABLE IF NOT EXISTS op_slack_rows (
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    step INTEGER,
    rank INTEGER NOT NULL,
    op VARCHAR,  -- the kernel, copy, collective or span (NULL: a CPU rank's compute self time)
    kind VARCHAR NOT NULL,  -- compute, copy or transfer
    calls BIGINT NOT NULL,
    dur_us DOUBLE NOT NULL,  -- the calls' replayed durations, summed
    slack_us DOUBLE,  -- the least slack of its calls (0: on the path; NULL: no call bounds the step)
    computed_at TIMESTAMPTZ NOT NULL
);
