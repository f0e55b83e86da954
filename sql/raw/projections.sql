-- depends on: nothing
-- One row per projected point: a run replayed under a scenario at a world size, written by
-- `tracehouse project` (a new projection of the same run and scenario replaces the old rows).
-- Fractions are of every rank's step windows summed over ranks and steps (METHODOLOGY's breakdown
-- applied to the replayed run, the shares scale_points gives a measured run); the step time is the
-- median over steps of the slowest rank's window; exposed_comm_<dim>_frac split exposed_comm_frac by
-- parallel dimension (dp includes the whole-world group; other: unknown groups). Throughput is
-- NULL when the run's manifest gives no tokens per step. scaling_efficiency and the marginal
-- throughput are against the run's own measured point; knee marks the smallest world size whose
-- marginal throughput per added device is below half of the measured throughput per device, and
-- knee_note says the same in words, or why no knee can be found (no tokens per step). A world size
-- the run cannot be projected to gets no row; `notes` says which and why (docs/projection.md); a
-- point that is no runnable configuration (less than one sequence per rank) has its `flag`.
-- measured_*: the measured point at this world size, of the run itself or of the study's run that
-- measured the same workload there (measured_run_id).
CREATE TABLE IF NOT EXISTS projections (
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    scenario VARCHAR NOT NULL,
    assumptions VARCHAR,  -- the scenario in words
    notes VARCHAR,  -- what the projection leaves out, in words: world sizes not projected and why (NULL: nothing)
    world_size INTEGER NOT NULL,
    layout VARCHAR,  -- the projected layout as --layout writes it: dp=N (DDP) or fsdp=N, then tp=N, pp=N
    measured_world_size INTEGER,
    step_time_us DOUBLE,
    step_time_low_us DOUBLE,  -- the error band: step_time_us / factor (docs/projection.md, "How far to trust a projection")
    step_time_high_us DOUBLE,  -- step_time_us x factor; the band and its basis are in provenance (band)
    memory_bytes DOUBLE,  -- per device: parameters, gradients, AdamW state and activations (docs/projection.md, "Memory per device")
    memory_capacity_bytes DOUBLE,  -- the device's memory (NULL: unknown, e.g. a CPU); a point needing more is flagged
    measured_step_time_us DOUBLE,
    measured_run_id VARCHAR,  -- the run measured at this world size (NULL: none)
    measured_tokens_per_s_per_device DOUBLE,
    tokens_per_s DOUBLE,
    tokens_per_s_per_device DOUBLE,
    scaling_efficiency DOUBLE,
    marginal_tokens_per_s_per_device DOUBLE,
    knee BOOLEAN,
    knee_note VARCHAR,  -- the run's knee in words, or why it cannot be found (same on each row)
    flag VARCHAR,  -- why the point is no runnable configuration, e.g. less than one sequence per rank (NULL: none)
    compute_frac DOUBLE,
    exposed_comm_frac DOUBLE,
    other_frac DOUBLE,
    idle_frac DOUBLE,
    exposed_comm_dp_frac DOUBLE,
    exposed_comm_tp_frac DOUBLE,
    exposed_comm_pp_frac DOUBLE,
    exposed_comm_other_frac DOUBLE,
    -- JSON: what the point rests on: the replay's own error (replay), the network model and what
    -- each link was fitted on (network: run, calibration, study or file), the interference and
    -- what it was fitted on (interference), the collectives measured and planned (collectives), the
    -- error band's rate per doubling and what it rests on (band)
    provenance VARCHAR,
    created_at TIMESTAMP
);
ALTER TABLE projections ADD COLUMN IF NOT EXISTS notes VARCHAR;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS measured_run_id VARCHAR;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS measured_tokens_per_s_per_device DOUBLE;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS knee_note VARCHAR;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS flag VARCHAR;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS provenance VARCHAR;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS step_time_low_us DOUBLE;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS step_time_high_us DOUBLE;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS memory_bytes DOUBLE;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS memory_capacity_bytes DOUBLE;
ALTER TABLE projections ADD COLUMN IF NOT EXISTS layout VARCHAR;
