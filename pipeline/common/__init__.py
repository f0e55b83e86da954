"""What collectors, pipeline and reports share: the error types, the run manifest, the
communication vocabulary and label format, the power-log format and the peak FLOP/s table.

Dependency-free by rule: these modules import only the standard library (and each other), so
the collectors, which run inside every training rank, load none of polars, duckdb, pyarrow or dask.
"""
