-- depends on: events
-- Per run: how many of its ranks have events. A TABLE, refreshed after every ingest, so that
-- top_kernels answers without the Parquet events (from any working directory).
CREATE OR REPLACE TABLE run_event_ranks AS
SELECT study, run_id, count(DISTINCT rank) AS n_ranks
FROM events
GROUP BY study, run_id;
