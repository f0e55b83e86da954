-- depends on: ops, op_costs
-- One row per cpu_op of a registered rank trace: what op_calls needs from the call tree
-- above and below it, computed in Python from `ops` (parent_id) and `op_costs` (which calls do
-- work) by whole-array walks over each rank's tree (pipeline/ops/tree_facts.py):
-- * phase: forward, backward or optimizer, from its outermost ancestor-or-self that is an
--   `autograd::engine::evaluate_function:` call (backward) or an `Optimizer.` annotation;
-- * above_work: a strict descendant does work (a cpu_op with FLOPs > 0 in op_costs);
-- * inside_unit: a strict ancestor is a counted unit of work (a call doing work with no working
--   descendant).
-- Filled right after this file runs and after every ingest, before the materialized tables are
-- refreshed (sql_runner.FILLED): the traces without rows are computed, rows of traces no longer
-- registered or of another version of the formulas (which decide what does work) are dropped.
CREATE TABLE IF NOT EXISTS op_tree (
    study VARCHAR NOT NULL,
    run_id VARCHAR NOT NULL,
    rank INTEGER,
    content_hash VARCHAR NOT NULL,  -- the trace
    op_id BIGINT NOT NULL,  -- as `ops`
    phase VARCHAR NOT NULL,  -- forward | backward | optimizer
    above_work BOOLEAN NOT NULL,  -- a strict descendant does work (a cpu_op with FLOPs > 0 in op_costs)
    inside_unit BOOLEAN NOT NULL,  -- a strict ancestor is a counted unit of work
    formulas_version VARCHAR NOT NULL  -- digest of pipeline/ops's sources (op_costs.formulas_version)
);
