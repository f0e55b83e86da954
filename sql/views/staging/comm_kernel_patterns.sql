-- User-added communication kernel patterns (METHODOLOGY: "plus any pattern the user adds"),
-- e.g. INSERT INTO comm_kernel_patterns VALUES ('%deepep%', 'DeepEP dispatch/combine').
-- Each pattern is an ILIKE pattern matched against the GPU event name. Empty by default.
CREATE TABLE IF NOT EXISTS comm_kernel_patterns (
    pattern VARCHAR NOT NULL,
    note VARCHAR
);
