"""Tracehouse collective labels (`common.comm_label`) read as typed Polars columns."""

from __future__ import annotations

import polars as pl
from tracehouse.pipeline.common.comm_label import LABEL_FIELDS

# The column type of each label field that is not text.
_TYPES: dict[str, pl.DataType] = {"seq": pl.Int64, "bytes": pl.Int64, "group_size": pl.Int32}


def label_columns(name: pl.Expr) -> list[pl.Expr]:
    """Vectorised: one typed expression `label_<field>` per label field (NULL where name is not a label)."""
    return [
        name.str.extract(rf"\|{key}=([^|]*)", 1)
        .cast(_TYPES.get(key, pl.String), strict=False)
        .alias(f"label_{key}")
        for key in LABEL_FIELDS
    ]
