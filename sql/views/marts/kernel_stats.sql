-- depends on: gpu_events
-- One row per run and kernel name: the distribution of its calls' durations pooled over every
-- rank that ran it, and the per-rank spread (HTA's kernel breakdown, across ranks). Kernels only
-- (kind 'kernel'; copies and memsets are not kernels), zero-length calls included (they are calls).
-- Quantiles: quantile_cont, linear interpolation between the two nearest order statistics (as
-- numpy's default 'linear'), over integer ns, converted to µs once. std_us: the sample standard
-- deviation (n - 1, as HTA and pandas), NULL for a single call.
-- slowest_rank: the rank whose calls of this kernel sum to the most time; ties to the lower rank.
CREATE OR REPLACE VIEW kernel_stats AS
WITH calls AS (
    SELECT study, run_id, rank, name AS kernel, end_ns - start_ns AS dur_ns
    FROM gpu_events
    WHERE kind = 'kernel'
),
per_rank AS (
    SELECT study, run_id, kernel, rank, sum(dur_ns) AS rank_ns
    FROM calls
    GROUP BY study, run_id, kernel, rank
),
spread AS (
    SELECT
        study, run_id, kernel,
        count(*) AS ranks,
        arg_max(rank, (rank_ns, -rank)) AS slowest_rank,
        max(rank_ns) AS rank_max_ns,
        min(rank_ns) AS rank_min_ns
    FROM per_rank
    GROUP BY study, run_id, kernel
),
pooled AS (
    SELECT
        study, run_id, kernel,
        count(*) AS calls,
        sum(dur_ns) AS total_ns,
        quantile_cont(dur_ns, 0.5) AS p50_ns,
        quantile_cont(dur_ns, 0.9) AS p90_ns,
        quantile_cont(dur_ns, 0.99) AS p99_ns,
        max(dur_ns) AS max_ns,
        stddev_samp(dur_ns) AS std_ns
    FROM calls
    GROUP BY study, run_id, kernel
)
SELECT
    p.study,
    p.run_id,
    p.kernel,
    s.ranks,
    p.calls,
    p.total_ns / 1e3 AS total_us,
    p.p50_ns / 1e3 AS p50_us,
    p.p90_ns / 1e3 AS p90_us,
    p.p99_ns / 1e3 AS p99_us,
    p.max_ns / 1e3 AS max_us,
    p.std_ns / 1e3 AS std_us,
    s.slowest_rank,
    s.rank_max_ns / 1e3 AS slowest_rank_us,
    s.rank_min_ns / 1e3 AS fastest_rank_us
FROM pooled AS p
JOIN spread AS s ON p.study = s.study AND p.run_id = s.run_id AND p.kernel = s.kernel;
