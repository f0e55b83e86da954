"""tracehouse.pipeline: what turns trace files into the warehouse and reads it back.

Sub-packages: `common` (vocabularies, hardware tables, errors; the standard library only),
`discovery` (which files are traces of which run and rank), `parsers` (one pure function per file
kind), `ops` (FLOPs, bytes and the call tree of each op), `ingest` (the Dask job that writes
the warehouse), `warehouse` (the DuckDB file, Parquet partitions, SQL tree, reading),
`projection` (replay, critical path, what-ifs), `cli` (the `tracehouse` command, thin over the
rest) and `api` (the top-level `tracehouse` package).

The modules here serve several sub-packages each: `progress` (progress lines on long work: ingest,
project, report), `display` (how results show in a notebook), `compare` (what changed between two
runs: `tracehouse diff`, the API and the report) and `export_trace` (a Perfetto trace of chosen
steps, all ranks on one clock).
"""
