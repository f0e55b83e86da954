-- depends on: comm_window_exposure, comm_intervals, runs
-- Why the step waits (METHODOLOGY): one row per communication interval per step window and rank,
-- with the collective behind it, its parallel dimension and phase, and its exposed share split
-- into waiting for the other ranks and transfer. Shares are integer ns converted once to µs;
-- over a window they sum to step_breakdown.exposed_comm_us exactly.
-- parallel_dim: the device-mesh dimension pg_desc names (mesh_<dim>..., or <dim>... alone: dp,
-- fsdp, ddp, hsdp -> dp; tp, pp, cp, ep), else from the run's layout: the whole world
-- (default_pg, or a group of world_size ranks) is the layout's one dimension of degree > 1, else
-- 'world'; another group is the one dimension whose degree is its size, else the layout's one
-- dimension of degree > 1; else 'unknown'.
CREATE OR REPLACE VIEW comm_exposure AS
WITH layouts AS (
    SELECT
        study, run_id, world_size, dp, tp, pp,
        CASE WHEN (coalesce(dp, 1) > 1)::INTEGER + (coalesce(tp, 1) > 1)::INTEGER + (coalesce(pp, 1) > 1)::INTEGER = 1
            THEN CASE WHEN dp > 1 THEN 'dp' WHEN tp > 1 THEN 'tp' ELSE 'pp' END
        END AS only_dim
    FROM runs
),
described AS (
    SELECT
        c.*,
        CASE regexp_extract(regexp_replace(lower(coalesce(c.pg_desc, '')), '^mesh_', ''), '^([a-z]+)', 1)
            WHEN 'dp' THEN 'dp' WHEN 'fsdp' THEN 'dp' WHEN 'ddp' THEN 'dp' WHEN 'hsdp' THEN 'dp'
            WHEN 'tp' THEN 'tp' WHEN 'pp' THEN 'pp' WHEN 'cp' THEN 'cp' WHEN 'ep' THEN 'ep'
        END AS mesh_dim
    FROM comm_intervals AS c
),
dimensioned AS (
    SELECT
        d.*,
        CASE
            WHEN d.mesh_dim IS NOT NULL THEN d.mesh_dim
            WHEN d.pg_desc = 'default_pg' OR d.group_size = l.world_size THEN coalesce(l.only_dim, 'world')
            WHEN (d.group_size = l.dp)::INTEGER + (d.group_size = l.tp)::INTEGER + (d.group_size = l.pp)::INTEGER = 1
                AND d.group_size > 1
                THEN CASE WHEN d.group_size = l.dp THEN 'dp' WHEN d.group_size = l.tp THEN 'tp' ELSE 'pp' END
            WHEN l.only_dim IS NOT NULL THEN l.only_dim
            ELSE 'unknown'
        END AS parallel_dim
    FROM described AS d
    LEFT JOIN layouts AS l ON d.study = l.study AND d.run_id = l.run_id
)
SELECT
    e.study, e.run_id, e.rank, e.step, c.name, c.op, c.process_group, c.pg_desc, c.parallel_dim, c.phase,
    c.seq, c.bytes, c.dtype,
    c.start_ns AS start_unix_ns,
    (c.end_ns - c.start_ns) / 1000.0 AS dur_us,
    e.in_window_ns / 1000.0 AS in_window_us,
    e.exposed_ns / 1000.0 AS exposed_us,
    e.exposed_wait_ns / 1000.0 AS exposed_wait_us,
    e.exposed_transfer_ns / 1000.0 AS exposed_transfer_us,
    c.transfer_ns / 1000.0 AS transfer_us,
    e.window_no, c.interval_no, c.rule
FROM comm_window_exposure AS e
JOIN dimensioned AS c
    ON e.study = c.study AND e.run_id = c.run_id AND e.rank = c.rank AND e.interval_no = c.interval_no;
