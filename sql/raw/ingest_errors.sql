-- depends on: nothing
-- One row per file that could not be ingested (latest attempt per path, hash and reason), and
-- one warning row per problem of a file that loaded (rows it dropped, tests that failed).
CREATE TABLE IF NOT EXISTS ingest_errors (
    path VARCHAR NOT NULL,
    content_hash VARCHAR,  -- NULL when the file could not be read at all
    reason VARCHAR NOT NULL,  -- one line
    "at" TIMESTAMPTZ NOT NULL,  -- quoted: AT is a keyword
    internal BOOLEAN NOT NULL DEFAULT false,  -- failed by a tracehouse bug, not by its input
    severity VARCHAR NOT NULL DEFAULT 'error'  -- error: not loaded; warning: loaded, with this problem
);
-- Warehouses made before the column existed gain it (their rows were all input errors).
ALTER TABLE ingest_errors ADD COLUMN IF NOT EXISTS internal BOOLEAN DEFAULT false;
ALTER TABLE ingest_errors ADD COLUMN IF NOT EXISTS severity VARCHAR DEFAULT 'error';
