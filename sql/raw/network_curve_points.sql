-- depends on: nothing
-- One row per measured point of a registered nccl-tests output file: one message size, out of
-- place or in place, of one test (the columns after source are
-- tracehouse.pipeline.parsers.nccl_tests.result.POINT_COLUMNS; a test checks they agree).
-- Small data, so a table in the DuckDB file, inserted in the transaction that registers the
-- file in network_files. The public view is network_curves.
CREATE TABLE IF NOT EXISTS network_curve_points (
    content_hash VARCHAR NOT NULL,  -- the file's row in network_files
    study VARCHAR NOT NULL,
    path VARCHAR NOT NULL,  -- absolute path at ingest time
    source VARCHAR NOT NULL,  -- nccl-tests
    test_index INTEGER NOT NULL,  -- 0-based position of the test in the file (a file may hold several)
    program VARCHAR,  -- the nccl-tests program, e.g. all_reduce_perf
    program_from VARCHAR,  -- header (# Collective test starting), file name, or busbw/algbw (only all_reduce has busbw > algbw)
    op VARCHAR,  -- the collective: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send_recv, gather, scatter; NULL for hypercube_perf
    ranks INTEGER,  -- how many: the # Rank lines, else derived from busbw/algbw; NULL when undecidable
    ranks_from VARCHAR,  -- rank lines or busbw/algbw; NULL with ranks
    nodes INTEGER,  -- distinct hosts in the rank lines; NULL without them
    devices VARCHAR,  -- JSON array of the distinct device names in the rank lines
    nccl_version VARCHAR,  -- NCCL's version when the file prints it (NCCL version line, nccl-library code)
    avg_busbw_gbps DOUBLE,  -- the test's # Avg bus bandwidth line
    line INTEGER NOT NULL,  -- 1-based line of the file holding the row
    bytes BIGINT NOT NULL,  -- nccl-tests size
    count BIGINT NOT NULL,  -- elements, as nccl-tests prints its count column
    dtype VARCHAR,  -- torch name (nccl-tests float is float32, double float64, half float16)
    redop VARCHAR,  -- NULL when the op does not reduce (printed none, or left blank)
    root INTEGER,  -- NULL when the op has no root (printed -1, or no root column)
    in_place BOOLEAN NOT NULL,  -- from the in-place columns of the row (false: out-of-place)
    time_us DOUBLE NOT NULL,
    algbw_gbps DOUBLE NOT NULL,  -- bytes / time, GB/s as nccl-tests prints it (2 decimals)
    busbw_gbps DOUBLE NOT NULL,  -- algbw x the op's factor (2(n-1)/n all_reduce, ...), as printed
    wrong BIGINT,  -- #wrong column (newer layouts); NULL for N/A or an old layout
    error DOUBLE  -- error column (old layouts); NULL for N/A or a newer layout
);
