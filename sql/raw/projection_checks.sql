-- depends on: nothing
-- One row per check of a projection: a run replayed at a world size where the study measured
-- another run of the same workload (same strategy, tp, pp and tokens per step), without the
-- scenario's what-ifs, written by `tracehouse project` (a new projection of the run replaces its
-- rows). The study's checks set the error band of every projected point (projections'
-- step_time_low_us and step_time_high_us; docs/projection.md, "How far to trust a projection").
CREATE TABLE IF NOT EXISTS projection_checks (
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    world_size INTEGER NOT NULL,  -- the run's measured world size
    check_world_size INTEGER NOT NULL,  -- where it was projected to, and the other run measured
    measured_run_id VARCHAR NOT NULL,
    projected_step_time_us DOUBLE NOT NULL,
    measured_step_time_us DOUBLE NOT NULL,
    log_error DOUBLE NOT NULL,  -- ln(projected / measured)
    doublings DOUBLE NOT NULL,  -- |log2(check_world_size / world_size)|
    checked_at TIMESTAMPTZ NOT NULL
);
