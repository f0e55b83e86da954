-- depends on: nothing
-- One row per segment of a replayed step's critical path, written by `tracehouse project`
-- (which replaces the run's rows): the chain of replay-graph edges that sets the length of the
-- slowest rank's window, walked back from its end (docs/projection.md "Critical path"). A run
-- that cannot be replayed gets one row with its `reason` and NULL segment columns.
CREATE TABLE IF NOT EXISTS critical_path_segments (
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    step INTEGER,  -- ProfilerStep number (NULL: a trace without steps, one window)
    path_rank INTEGER,  -- the slowest rank of the step: whose window the path spans
    step_us DOUBLE,  -- the replayed length of that window
    seq INTEGER,  -- 0 for the earliest segment
    rank INTEGER,  -- the rank the segment runs on (a wait: the rank that waits)
    kind VARCHAR,  -- compute, copy, transfer, wait, host, host_gap, launch_delay, stream_wait, sync_tail, residual
    op VARCHAR,  -- the kernel, runtime call, collective or span; a wait names the rank waited for
    start_us DOUBLE,  -- after the window's start
    dur_us DOUBLE,
    op_id BIGINT,  -- a kernel or copy: the host op that launched it (ops.op_id on `rank`), where the trace links it
    reason VARCHAR,  -- why the run has no path (NULL when it has one)
    traces_digest VARCHAR,  -- md5 of the run's trace content hashes when computed (the view's staleness test)
    computed_at TIMESTAMPTZ NOT NULL
);
-- Warehouses made before the column existed gain it (NULL for the paths already stored).
ALTER TABLE critical_path_segments ADD COLUMN IF NOT EXISTS op_id BIGINT;
