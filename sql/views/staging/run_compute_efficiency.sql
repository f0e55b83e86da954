-- depends on: op_rates
-- Per run: how close its compute runs to the roofline (docs/methodology-decisions.md "Compute
-- efficiency"), over the ops of every step window on every rank (op_rates, step known):
-- * compute_efficiency: the time-weighted mean of bound_frac over the ops that have a bound,
--   sum(work_us * bound_frac) / sum(work_us): their time at the bound over their measured time;
-- * compute_below_half_bound_frac: the share of that bounded time in op groups below half their bound;
-- * compute_bounded_frac: the share of all op time (work_us) that has a bound at all (ops with
--   FLOPs on a device in the peak table): how much of the compute the two figures speak for.
-- A run whose ops have no bound (a CPU, an unknown device, no shapes) has NULL for the first two.
CREATE OR REPLACE VIEW run_compute_efficiency AS
SELECT
    study, run_id,
    sum(work_us * bound_frac) FILTER (WHERE bound_frac IS NOT NULL)
        / nullif(sum(work_us) FILTER (WHERE bound_frac IS NOT NULL), 0) AS compute_efficiency,
    coalesce(sum(work_us) FILTER (WHERE bound_frac < 0.5), 0)
        / nullif(sum(work_us) FILTER (WHERE bound_frac IS NOT NULL), 0) AS compute_below_half_bound_frac,
    coalesce(sum(work_us) FILTER (WHERE bound_frac IS NOT NULL), 0)
        / nullif(sum(work_us), 0) AS compute_bounded_frac
FROM op_rates
WHERE step IS NOT NULL AND work_us > 0
GROUP BY study, run_id
