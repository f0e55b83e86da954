-- depends on: gpu_events, launch_calls
-- Kernel launch statistics per rank (HTA's get_cuda_kernel_launch_stats, summarised): for every
-- GPU event (kernel, memcpy, memset) whose launching runtime call is in the trace, the delay from
-- that call's start to the event's start (events.launch_ts_unix_ns: the earliest runtime call
-- with its correlation), its distribution (quantile_cont, linear interpolation, over integer ns),
-- HTA's launch delay (from the call's end, clipped at 0) and the events shorter than their
-- launch call (the host spends longer launching them than the device running them).
-- One row per rank with GPU events; a rank none of whose events has its launch in the trace
-- has launched = 0 and NULL figures.
CREATE OR REPLACE VIEW launch_stats AS
WITH paired AS (
    SELECT
        d.study, d.run_id, d.rank, d.launch_ns,
        d.start_ns - d.launch_ns AS delay_ns,
        CASE WHEN c.call_ns IS NOT NULL THEN greatest(d.start_ns - d.launch_ns - c.call_ns, 0) END AS after_call_ns,
        d.end_ns - d.start_ns < c.call_ns AS shorter
    FROM gpu_events AS d
    LEFT JOIN launch_calls AS c
        ON d.study = c.study AND d.run_id = c.run_id AND d.rank = c.rank
        AND d.correlation = c.correlation AND d.launch_ns = c.launch_ns
)
SELECT
    study,
    run_id,
    rank,
    count(launch_ns) AS launched,
    count(*) - count(launch_ns) AS launchless,
    quantile_cont(delay_ns, 0.5) / 1e3 AS delay_p50_us,
    quantile_cont(delay_ns, 0.9) / 1e3 AS delay_p90_us,
    quantile_cont(delay_ns, 0.99) / 1e3 AS delay_p99_us,
    max(delay_ns) / 1e3 AS delay_max_us,
    avg(delay_ns) / 1e3 AS delay_mean_us,
    avg(after_call_ns) / 1e3 AS after_call_mean_us,
    max(after_call_ns) / 1e3 AS after_call_max_us,
    CAST(coalesce(count_if(shorter), 0) AS BIGINT) AS shorter_than_launch,
    coalesce(count_if(shorter), 0) / nullif(count(launch_ns), 0) AS shorter_share
FROM paired
GROUP BY study, run_id, rank;
