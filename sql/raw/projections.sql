-- depends on: nothing
-- One row per projected point: a run replayed under a scenario at a world size, written by
-- `tracehouse project` (a new projection of the same run and scenario replaces the old rows).
-- Fractions are of the slowest rank's step windows summed over the steps (METHODOLOGY's
-- breakdown applied to the replayed run); exposed_comm_<dim>_frac split exposed_comm_frac by
-- parallel dimension (dp includes the whole-world group; other: unknown groups). Throughput is
-- NULL when the run's manifest gives no tokens per step. scaling_efficiency and the marginal
-- throughput are against the run's own measured point; knee marks the smallest world size whose
-- marginal throughput per added device is below half of the measured throughput per device.
CREATE TABLE IF NOT EXISTS projections (
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    scenario VARCHAR NOT NULL,
    assumptions VARCHAR,  -- the scenario in words
    notes VARCHAR,  -- what the projection of this run leaves out, in words (NULL: nothing)
    world_size INTEGER NOT NULL,
    measured_world_size INTEGER,
    step_time_us DOUBLE,
    measured_step_time_us DOUBLE,
    tokens_per_s DOUBLE,
    tokens_per_s_per_device DOUBLE,
    scaling_efficiency DOUBLE,
    marginal_tokens_per_s_per_device DOUBLE,
    knee BOOLEAN,
    compute_frac DOUBLE,
    exposed_comm_frac DOUBLE,
    other_frac DOUBLE,
    idle_frac DOUBLE,
    exposed_comm_dp_frac DOUBLE,
    exposed_comm_tp_frac DOUBLE,
    exposed_comm_pp_frac DOUBLE,
    exposed_comm_other_frac DOUBLE,
    created_at TIMESTAMP
);
ALTER TABLE projections ADD COLUMN IF NOT EXISTS notes VARCHAR;
