"""Ingest: parse each discovered file on Dask (tasks), write its Parquet, register it (driver side)."""
