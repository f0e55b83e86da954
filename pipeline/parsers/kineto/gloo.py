"""COLLECTIVES of CPU (gloo) traces: `gloo:*` spans, attributed to tracehouse labels when present.

A `gloo:*` span carries what gloo moves: its `Input Dims` / `Input type` (else those of the
enclosing `c10d::*` op on the same thread). Its payload = elements × dtype size; barrier
spans have none (payload 0). Reported bytes follow the nccl-tests convention (see
collectives): all_gather = payload × group size (the span holds one rank's input).

Labels (`tracehouse.collective|op=...|bytes=...`, `common.comm_label`) say what the
program asked for. Matching rule: the k-th gloo span with key (op, payload) on this rank is
the k-th label with the same key, both in start order. A label's key is what gloo shows for
it: op reduce_scatter runs as `gloo:all_reduce` over the whole input (payload = bytes);
all_gather's payload is bytes / group_size; other ops are unchanged. A matched span takes
op, bytes, dtype, process group, pg_desc, seq and group size from its label, and ts/dur
from the span (source "gloo"). A label with no span (an op gloo does not name) becomes a
row of its own with the label span's ts/dur (source "label"). A span with no label keeps
what the span says (group size only when pg_config has exactly one group).
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from tracehouse.pipeline.common.comm_names import dtype_name
from tracehouse.pipeline.common.comm_vocabulary import C10D_OP_PREFIX, GLOO_SPAN_PREFIX, LABEL_START
from tracehouse.pipeline.parsers.kineto.commargs import per_distinct
from tracehouse.pipeline.parsers.kineto.labels import label_columns
from tracehouse.pipeline.parsers.kineto.limits import int64_product
from tracehouse.pipeline.parsers.kineto.meta import TopLevel
from tracehouse.pipeline.parsers.kineto.spans import enclosing
from tracehouse.pipeline.warehouse.schema import COLLECTIVES

_KEY = ["key_op", "key_bytes", "k"]
# What a span falls back on from its enclosing `c10d::*` op (input_* as collectives.DERIVED reads them).
_OP_COLUMNS = ("numel", "input_type", "input_dtype", "input_bytes")


def _nth(frame: pl.DataFrame) -> pl.DataFrame:
    """Number the rows of each (op, payload) key in start order."""
    return frame.sort("ts_unix_ns", maintain_order=True).with_columns(
        pl.int_range(pl.len()).over(["key_op", "key_bytes"]).alias("k")
    )


def _spans(comm: pl.DataFrame, top: TopLevel) -> pl.DataFrame:
    spans = comm.filter(pl.col("name").str.starts_with(GLOO_SPAN_PREFIX))
    ops = comm.filter(pl.col("name").str.starts_with(C10D_OP_PREFIX))
    spans = enclosing(spans, "ts_unix_ns", ops, _OP_COLUMNS, "op_")
    own = pl.col("input_type").is_not_null()  # the span's own `Input type`, else its op's
    spans = spans.with_columns(
        pl.col("name_op").alias("key_op"),
        pl.when(own).then("input_dtype").otherwise("op_input_dtype").alias("dtype"),
        pl.when(own).then("input_bytes").otherwise("op_input_bytes").alias("dtype_bytes"),
        pl.lit(top.single_group["group_size"], pl.Int64).alias("group_size"),
    )
    payload = (
        pl.when(pl.col("key_op") == "barrier")
        .then(0)
        .otherwise(int64_product(pl.coalesce("numel", "op_numel"), pl.col("dtype_bytes")))
    )
    return _nth(spans.with_columns(payload.fill_null(-1).alias("key_bytes")))


def _labels(comm: pl.DataFrame) -> pl.DataFrame:
    labels = comm.filter(pl.col("name").str.starts_with(LABEL_START)).with_columns(
        label_columns(pl.col("name"))
    )
    key_op = (
        pl.when(pl.col("label_op") == "reduce_scatter")
        .then(pl.lit("all_reduce"))
        .otherwise(pl.col("label_op"))
    )
    payload = (
        pl.when(pl.col("label_op") == "all_gather")
        .then(pl.col("label_bytes") // pl.col("label_group_size"))
        .otherwise(pl.col("label_bytes"))
    )
    dtype = per_distinct(
        labels["label_dtype"].to_arrow(), {"label_dtype_name": (dtype_name, pa.large_string())}
    )
    return _nth(
        labels.with_columns(
            key_op.alias("key_op"),
            payload.fill_null(-1).alias("key_bytes"),
            *(pl.Series(name, values) for name, values in dtype.items()),
        )
    )


def _from_label(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    return frame.with_columns(
        pl.col("label_op").alias("op"),
        pl.col("label_pg").alias("process_group"),
        pl.col("label_pg_desc").alias("pg_desc"),
        pl.col("label_seq").alias("seq"),
        pl.col("label_bytes").alias("bytes"),
        pl.col("label_dtype_name").alias("dtype"),
        pl.col("label_group_size").alias("group_size"),
        pl.lit(source).alias("source"),
    ).select([pl.col(c).cast(t) for c, t in COLLECTIVES.items()])


def _unlabelled(spans: pl.DataFrame, top: TopLevel) -> pl.DataFrame:
    single = top.single_group
    factor = pl.when(pl.col("key_op") == "all_gather").then(pl.col("group_size")).otherwise(1)
    return spans.with_columns(
        pl.col("key_op").alias("op"),
        pl.lit(single["process_group"], pl.String).alias("process_group"),
        pl.lit(single["pg_desc"], pl.String).alias("pg_desc"),
        pl.lit(None, pl.Int64).alias("seq"),
        int64_product(pl.when(pl.col("key_bytes") >= 0).then(pl.col("key_bytes")), factor).alias("bytes"),
        pl.lit("gloo").alias("source"),
    ).select([pl.col(c).cast(t) for c, t in COLLECTIVES.items()])


def gloo_rows(table: pa.Table, top: TopLevel) -> pl.DataFrame:
    """gloo spans and tracehouse labels as COLLECTIVES rows (`table`: collectives' candidate events)."""
    names = pc.drop_null(pc.unique(table["name"])).to_pylist()
    if not any(name.startswith((GLOO_SPAN_PREFIX, LABEL_START)) for name in names):  # GPU traces
        return pl.DataFrame(schema=COLLECTIVES)  # (skips ~15 small Polars queries)
    comm = pl.DataFrame(dict(zip(table.column_names, table.columns, strict=True)))
    spans, labels = _spans(comm, top), _labels(comm)
    if spans.is_empty() and labels.is_empty():
        return pl.DataFrame(schema=COLLECTIVES)
    label_cols = [c for c in labels.columns if c.startswith("label_")]
    matched = spans.join(labels.select(*_KEY, *label_cols), on=_KEY, how="inner")
    return pl.concat(
        [
            _from_label(matched, "gloo"),
            _unlabelled(spans.join(labels, on=_KEY, how="anti"), top),
            _from_label(labels.join(spans, on=_KEY, how="anti"), "label"),
        ],
        how="vertical",
    )
