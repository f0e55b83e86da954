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
from tracehouse.pipeline.common.comm_names import dtype_name, dtype_size, op_name
from tracehouse.pipeline.common.comm_vocabulary import C10D_OP_PREFIX, GLOO_SPAN_PREFIX, LABEL_START
from tracehouse.pipeline.parsers.kineto.commargs import per_value
from tracehouse.pipeline.parsers.kineto.labels import label_columns
from tracehouse.pipeline.parsers.kineto.limits import int64_product
from tracehouse.pipeline.parsers.kineto.meta import TopLevel
from tracehouse.pipeline.parsers.kineto.spans import enclosing
from tracehouse.pipeline.schema import COLLECTIVES

_KEY = ["key_op", "key_bytes", "k"]


def _nth(frame: pl.DataFrame) -> pl.DataFrame:
    """Number the rows of each (op, payload) key in start order."""
    return frame.sort("ts_unix_ns", maintain_order=True).with_columns(
        pl.int_range(pl.len()).over(["key_op", "key_bytes"]).alias("k")
    )


def _spans(comm: pl.DataFrame, top: TopLevel) -> pl.DataFrame:
    spans = comm.filter(pl.col("name").str.starts_with(GLOO_SPAN_PREFIX))
    ops = comm.filter(pl.col("name").str.starts_with(C10D_OP_PREFIX))
    spans = enclosing(spans, "ts_unix_ns", ops, ("numel", "input_type"), "op_")
    dtype = per_value(spans.select(pl.coalesce("input_type", "op_input_type"))[:, 0], dtype_name, "dtype")
    spans = spans.with_columns(
        per_value(spans["name"], op_name, "key_op"),
        dtype,
        per_value(dtype, dtype_size, "dtype_bytes", pl.Int64),
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
    return _nth(labels.with_columns(key_op.alias("key_op"), payload.fill_null(-1).alias("key_bytes")))


def _from_label(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    return frame.with_columns(
        pl.col("label_op").alias("op"),
        pl.col("label_pg").alias("process_group"),
        pl.col("label_pg_desc").alias("pg_desc"),
        pl.col("label_seq").alias("seq"),
        pl.col("label_bytes").alias("bytes"),
        per_value(frame["label_dtype"], dtype_name, "dtype"),
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


def _has_gloo_or_labels(names: list[str | None]) -> bool:
    """True when some name is a `gloo:*` span or a tracehouse label (the rows `gloo_rows` reads)."""
    prefixes = (GLOO_SPAN_PREFIX, LABEL_START)
    return any(name is not None and name.startswith(prefixes) for name in names)


def gloo_rows(comm: pl.DataFrame, top: TopLevel) -> pl.DataFrame:
    """gloo spans and tracehouse labels as COLLECTIVES rows."""
    if not _has_gloo_or_labels(comm["name"].to_list()):  # GPU traces: skip ~15 small Polars queries
        return pl.DataFrame(schema=COLLECTIVES)
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
