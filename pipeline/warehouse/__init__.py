"""The warehouse: one DuckDB file plus Parquet partitions, the SQL that builds its relations, and reading it.

* `schema`: the raw tables' columns, types and units, declared once (the parsers produce them);
* `partitions`: the Parquet side, where each source file's rows live (no DuckDB: ingest's
  workers write partitions without it);
* `database`: the DuckDB file: creating, opening and locking it, transactions, creating the views;
* `sql_runner`: the packaged `sql/` tree, one relation per file, run in its declared order;
* `refresh`: recomputing the materialized tables of the runs whose inputs changed;
* `meta`: the warehouse's facts about itself (`warehouse_meta`) and whether a relation is there;
* `view_docs`: the public views' contracts, their DuckDB comments and `docs/views.md`;
* `sandbox`: the read connection that reads the warehouse and nothing else, and writes nothing;
* `reading`: read-only SQL (`tracehouse query`) and the handle `tracehouse.open` returns.

This file imports nothing: a parser that needs `schema` does not load DuckDB.
"""
