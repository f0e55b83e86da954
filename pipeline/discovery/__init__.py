"""Discovery: which files to ingest, as which study, run and rank (before anything is parsed)."""
