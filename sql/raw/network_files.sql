-- depends on: nothing
-- One row per registered nccl-tests output file (keyed by content hash, like traces); its
-- points are the rows of network_curve_points with the same content_hash, inserted with it.
CREATE TABLE IF NOT EXISTS network_files (
    content_hash VARCHAR PRIMARY KEY,
    study VARCHAR NOT NULL,  -- --study, or the manifest.json beside the file, else default
    path VARCHAR NOT NULL,  -- absolute path at ingest time
    source VARCHAR NOT NULL,  -- nccl-tests
    size_bytes BIGINT NOT NULL,
    n_tests INTEGER NOT NULL,  -- tests in the file (one per program run), failed ones included
    n_points BIGINT NOT NULL,  -- rows in network_curve_points: one per size and placement
    programs VARCHAR,  -- the nccl-tests programs of its tests, comma-separated
    failures VARCHAR,  -- JSON array: one line per test that printed a failure; [] when none
    ingested_at TIMESTAMPTZ NOT NULL
);
