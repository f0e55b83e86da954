-- depends on: nothing
-- User-added communication kernel patterns (METHODOLOGY: "plus any pattern the user adds"),
-- e.g. INSERT INTO comm_kernel_patterns VALUES ('%deepep%', 'DeepEP dispatch/combine').
-- Each pattern is an ILIKE pattern matched against the GPU event name. Empty by default.
-- gpu_events is a materialized table: the warehouse notices a changed pattern list and
-- recomputes it (and the breakdown) before the next query.
CREATE TABLE IF NOT EXISTS comm_kernel_patterns (
    pattern VARCHAR NOT NULL,
    note VARCHAR
);
