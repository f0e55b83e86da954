-- depends on: nothing
-- One row per study and device type: the interference model `tracehouse project` fitted on the
-- study's measured multi-rank runs (docs/projection.md, "Communication that competes"), written
-- when it fits and reused by later projections of the study while its traces are the same
-- (traces_digest) and the model is (model_version). A collective's transfer stretches by
-- (1 + transfer_stretch x overlap) and compute by (1 + compute_stretch x overlap), overlap the share
-- of its time with compute (a transfer) or a transfer in flight (compute) on its rank.
CREATE TABLE IF NOT EXISTS interference_fits (
    study VARCHAR NOT NULL,
    device_type VARCHAR NOT NULL,  -- the runs' device_type (cpu for gloo runs; gpu when no manifest says)
    transfer_stretch DOUBLE,
    compute_stretch DOUBLE,
    collectives INTEGER,  -- measured instances the transfer stretch rests on (0: not fitted, the default)
    runs INTEGER,  -- runs they came from
    signatures INTEGER,  -- op signatures the compute stretch rests on (0: not fitted, the default)
    transfer_error_before DOUBLE,  -- sum |measured - modelled| / sum measured over the collectives, without the stretch
    transfer_error_after DOUBLE,  -- the same with it
    run_scales VARCHAR,  -- JSON object: run_id -> the run's level against its network model
    traces_digest VARCHAR,  -- md5 of the study's trace content hashes when fitted
    model_version INTEGER,  -- interference.MODEL_VERSION when fitted
    fitted_at TIMESTAMPTZ NOT NULL
);
