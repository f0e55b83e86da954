-- depends on: ops
-- One row per distinct host-op signature (name and the three shape texts, as `ops` holds them)
-- whose name has a formula in pipeline/ops (docs/flops.md): its FLOPs and bytes per call.
-- Filled right after this file runs and after every ingest, before the materialized tables are
-- refreshed, from the signatures not yet here (pipeline/ops/store.py, sql_runner.FILLED), so
-- each signature is evaluated once; rows from another version of the formulas are recomputed.
-- formula NULL: the name has a formula but the shapes do not fit it (no shapes recorded, a
-- variable-length attention call); an op whose name has no formula has no row.
CREATE TABLE IF NOT EXISTS op_costs (
    name VARCHAR NOT NULL,
    input_dims VARCHAR,
    input_types VARCHAR,
    concrete_inputs VARCHAR,
    formula VARCHAR,  -- the formula's name in docs/flops.md
    flops BIGINT,  -- per call
    bytes BIGINT,  -- per call, a lower bound: inputs read and outputs written once
    dtype VARCHAR,  -- bf16 | fp16 | fp32: the peak that bounds the call (first tensor input's type)
    formulas_version VARCHAR NOT NULL  -- digest of pipeline/ops's sources that computed the row
);
