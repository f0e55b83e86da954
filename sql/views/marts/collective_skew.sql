-- depends on: collective_instances
-- Per run, process group and op: start-skew percentiles over matched instances.
CREATE OR REPLACE VIEW collective_skew AS
WITH one_per_instance AS (
    SELECT DISTINCT study, run_id, process_group, op, instance_no, skew_us, n_ranks
    FROM collective_instances
    WHERE skew_us IS NOT NULL
)
SELECT
    study, run_id, process_group, op,
    count(*) AS n_instances,
    max(n_ranks) AS n_ranks,
    quantile_cont(skew_us, 0.5) AS skew_p50_us,
    quantile_cont(skew_us, 0.9) AS skew_p90_us,
    quantile_cont(skew_us, 0.99) AS skew_p99_us,
    max(skew_us) AS skew_max_us
FROM one_per_instance
GROUP BY study, run_id, process_group, op;
