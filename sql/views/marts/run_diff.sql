-- depends on: run_step_times, step_breakdown, top_kernels, op_breakdown, module_breakdown, op_calls, critical_path, critical_path_segments
-- What changed between two runs, per step: for every ordered pair of runs (A, B) with a step
-- time, the step-time components (step_time_us x share: they sum to the step time, so their
-- changes sum to the step-time change), every kernel or op name (its whole-trace time per
-- rank divided by the step windows per rank; kernels overlap, so these do not sum), and one
-- level down every innermost op (op_breakdown) and module path and phase (module_breakdown):
-- their work time in steps over all ranks divided by the run's rank step windows (summed in whole
-- ns, so the figure does not depend on the order DuckDB's threads add the rows in). With the
-- change B - A, its share of the step-time change, and whether B's stored critical path runs
-- through the item. Filter on the pair: the view is lazy.
CREATE OR REPLACE VIEW run_diff AS
WITH timed AS (
    SELECT * FROM run_step_times WHERE step_time_us > 0
),
components AS (
    SELECT study, run_id, 'component' AS item, component AS kind, component AS name,
        CAST(NULL AS VARCHAR) AS class, step_time_us * frac AS us_per_step
    FROM (
        SELECT study, run_id, step_time_us, compute_frac AS compute, exposed_comm_frac AS exposed_comm,
            other_frac AS other, idle_frac AS idle
        FROM timed
    ) UNPIVOT (frac FOR component IN (compute, exposed_comm, other, idle))
),
names AS (
    SELECT k.study, k.run_id, CASE WHEN k.rule = 'gpu' THEN 'kernel' ELSE 'op' END AS item, k.kind, k.name,
        k.class, k.us_per_rank / t.windows_per_rank AS us_per_step
    FROM top_kernels AS k
    JOIN timed AS t ON k.study = t.study AND k.run_id = t.run_id
),
rank_windows AS (
    SELECT study, run_id, count(*) AS windows FROM step_breakdown GROUP BY study, run_id
),
innermost_ops AS (
    SELECT o.study, o.run_id, 'innermost_op' AS item, 'cpu_op' AS kind, o.op AS name,
        CAST(NULL AS VARCHAR) AS class, sum(round(o.work_us * 1e3)) / 1e3 / any_value(w.windows) AS us_per_step
    FROM op_breakdown AS o
    JOIN rank_windows AS w ON o.study = w.study AND o.run_id = w.run_id
    SEMI JOIN timed AS t ON o.study = t.study AND o.run_id = t.run_id
    WHERE o.step IS NOT NULL
    GROUP BY o.study, o.run_id, o.op
),
modules AS (
    SELECT m.study, m.run_id, 'module' AS item, m.phase AS kind, coalesce(m.module, '(no module)') AS name,
        CAST(NULL AS VARCHAR) AS class, sum(round(m.work_us * 1e3)) / 1e3 / any_value(w.windows) AS us_per_step
    FROM module_breakdown AS m
    JOIN rank_windows AS w ON m.study = w.study AND m.run_id = w.run_id
    SEMI JOIN timed AS t ON m.study = t.study AND m.run_id = t.run_id
    WHERE m.step IS NOT NULL
    GROUP BY m.study, m.run_id, m.phase, coalesce(m.module, '(no module)')
),
items AS (
    SELECT * FROM components
    UNION ALL
    SELECT * FROM names
    UNION ALL
    SELECT * FROM innermost_ops
    UNION ALL
    SELECT * FROM modules
),
-- What each run's stored critical path (any step) runs through: the names on its segments (a
-- kernel or collective on a GPU rank, an op on a CPU rank) and the module path and phase of each
-- op on it; on a GPU rank, the ops that launched the path's kernels and copies (the segments'
-- op_id) and their modules. Runs without a current path have no row in `pathed`; a GPU run whose
-- path links no kernel to its op (a trace without those links, or a path stored by an older
-- tracehouse) has its innermost ops and modules not judged (`unlinked`).
pathed AS (
    SELECT DISTINCT p.study, p.run_id,
        coalesce(g.gpu, false) AND NOT EXISTS (
            SELECT 1 FROM critical_path_segments AS s
            WHERE s.study = p.study AND s.run_id = p.run_id AND s.op_id IS NOT NULL
        ) AS unlinked
    FROM critical_path AS p
    LEFT JOIN (SELECT study, run_id, bool_or(gpu_rank) AS gpu FROM op_calls GROUP BY ALL) AS g
        ON g.study = p.study AND g.run_id = p.run_id
    WHERE p.kind IS NOT NULL
),
path_names AS (
    SELECT DISTINCT study, run_id, op AS name FROM critical_path WHERE op IS NOT NULL AND kind <> 'wait'
),
launchers AS (  -- the calls that launched a kernel or copy on a current path
    SELECT DISTINCT c.study, c.run_id, c.name, c.phase, c.module
    FROM critical_path_segments AS s
    SEMI JOIN pathed AS q ON q.study = s.study AND q.run_id = s.run_id
    JOIN op_calls AS c ON c.study = s.study AND c.run_id = s.run_id AND c.rank = s.rank AND c.op_id = s.op_id
    WHERE s.op_id IS NOT NULL
),
on_path AS (
    SELECT study, run_id, unnest(['kernel', 'op', 'innermost_op']) AS item, NULL AS kind, name FROM path_names
    UNION ALL
    SELECT DISTINCT c.study, c.run_id, 'module', c.phase, coalesce(c.module, '(no module)')
    FROM op_calls AS c
    SEMI JOIN path_names AS p ON p.study = c.study AND p.run_id = c.run_id AND p.name = c.name
    WHERE c.on_timeline
    UNION ALL
    SELECT DISTINCT study, run_id, 'innermost_op', NULL, name FROM launchers
    UNION ALL
    SELECT DISTINCT study, run_id, 'module', phase, coalesce(module, '(no module)') FROM launchers
),
pairs AS (
    SELECT a.study AS study_a, a.run_id AS run_a, b.study AS study_b, b.run_id AS run_b,
        a.step_time_us AS step_a_us, b.step_time_us AS step_b_us
    FROM timed AS a
    JOIN timed AS b ON a.study <> b.study OR a.run_id <> b.run_id
),
sides AS (
    SELECT p.*, 'a' AS side, i.item, i.kind, i.name, i.class, i.us_per_step
    FROM pairs AS p JOIN items AS i ON i.study = p.study_a AND i.run_id = p.run_a
    UNION ALL
    SELECT p.*, 'b', i.item, i.kind, i.name, i.class, i.us_per_step
    FROM pairs AS p JOIN items AS i ON i.study = p.study_b AND i.run_id = p.run_b
),
paired AS (
    SELECT
        study_a, run_a, study_b, run_b, step_a_us, step_b_us, item, kind, name,
        max(class) AS class,
        coalesce(sum(us_per_step) FILTER (WHERE side = 'a'), 0) AS a_us_per_step,
        coalesce(sum(us_per_step) FILTER (WHERE side = 'b'), 0) AS b_us_per_step
    FROM sides
    GROUP BY study_a, run_a, study_b, run_b, step_a_us, step_b_us, item, kind, name
)
SELECT
    study_a, run_a, study_b, run_b, item, kind, name, class,
    a_us_per_step, b_us_per_step,
    CASE
        WHEN item = 'component' OR NOT EXISTS (
            SELECT 1 FROM pathed AS q
            WHERE q.study = paired.study_b AND q.run_id = paired.run_b
              AND NOT (q.unlinked AND paired.item IN ('innermost_op', 'module'))
        ) THEN NULL
        ELSE EXISTS (
            SELECT 1 FROM on_path AS o
            WHERE o.study = paired.study_b AND o.run_id = paired.run_b AND o.item = paired.item
              AND o.name = paired.name AND (o.kind IS NULL OR o.kind = paired.kind)
        )
    END AS on_path_b,
    b_us_per_step - a_us_per_step AS change_us,
    step_a_us, step_b_us,
    step_b_us - step_a_us AS step_change_us,
    (b_us_per_step - a_us_per_step) / nullif(step_b_us - step_a_us, 0) AS share_of_step_change,
    row_number() OVER (
        PARTITION BY study_a, run_a, study_b, run_b, item
        ORDER BY b_us_per_step - a_us_per_step DESC, name, kind
    ) AS change_rank
FROM paired;
