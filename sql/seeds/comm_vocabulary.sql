-- depends on: nothing
-- The built-in communication vocabulary, one row per pattern (kind, pattern): defined once in
-- tracehouse.pipeline.common.comm_vocabulary, which the parser uses too; the warehouse
-- rewrites these rows from it whenever it creates the relations, so edits here do not last
-- (add custom comm kernels to comm_kernel_patterns). How each kind matches a name:
--   kernel_prefix      GPU kernel: lower(name) starts with pattern
--   kernel_substring   GPU kernel: lower(name) contains pattern
--   host_op_prefix     host op: name starts with pattern (communication, not compute)
--   host_op_name       host op: name = pattern
--   comm_span_prefix   CPU-only rank: name starts with pattern (a communication span)
CREATE TABLE IF NOT EXISTS comm_vocabulary (
    kind VARCHAR NOT NULL,
    pattern VARCHAR NOT NULL,
    PRIMARY KEY (kind, pattern)
);
