-- depends on: run_step_times, top_kernels
-- What changed between two runs, per step: for every ordered pair of runs (A, B) with a step
-- time, the step-time components (step_time_us x share: they sum to the step time, so their
-- changes sum to the step-time change) and every kernel or op name (its whole-trace time per
-- rank divided by the step windows per rank; kernels overlap, so these do not sum), with the
-- change B - A and its share of the step-time change. Filter on the pair: the view is lazy.
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
items AS (
    SELECT * FROM components
    UNION ALL
    SELECT * FROM names
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
    b_us_per_step - a_us_per_step AS change_us,
    step_a_us, step_b_us,
    step_b_us - step_a_us AS step_change_us,
    (b_us_per_step - a_us_per_step) / nullif(step_b_us - step_a_us, 0) AS share_of_step_change,
    row_number() OVER (
        PARTITION BY study_a, run_a, study_b, run_b, item
        ORDER BY b_us_per_step - a_us_per_step DESC, name, kind
    ) AS change_rank
FROM paired;
