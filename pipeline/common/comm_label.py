"""The collective label format: how a gloo collective carries op, bytes, dtype and group.

gloo traces have no `record_param_comms`, so `collectors/` wraps every collective it issues
in a `torch.profiler.record_function` span whose name is a label of this form:

    tracehouse.collective|op=all_reduce|pg=0|pg_desc=default_pg|seq=3|bytes=4096|dtype=float32|group_size=2

Fields are `key=value` separated by `|`; values never contain `|`. `seq` counts the
collectives this rank issued on that process group, from 0. The parser reads the labels
back (`parse_label`, or the vectorised `label_columns`) to attribute gloo spans.
"""

from __future__ import annotations

import polars as pl

LABEL_PREFIX = "tracehouse.collective"
LABEL_FIELDS: dict[str, pl.DataType] = {
    "op": pl.String,
    "pg": pl.String,
    "pg_desc": pl.String,
    "seq": pl.Int64,
    "bytes": pl.Int64,
    "dtype": pl.String,
    "group_size": pl.Int32,
}


def format_label(*, op: str, pg: str, pg_desc: str, seq: int, bytes: int, dtype: str, group_size: int) -> str:
    """The record_function name for one collective."""
    values = {
        "op": op,
        "pg": pg,
        "pg_desc": pg_desc,
        "seq": seq,
        "bytes": bytes,
        "dtype": dtype,
        "group_size": group_size,
    }
    for key, value in values.items():
        if "|" in str(value) or "=" in str(value):
            raise ValueError(f"label field {key}={value!r} may not contain '|' or '='")
    return LABEL_PREFIX + "".join(f"|{k}={values[k]}" for k in LABEL_FIELDS)


def parse_label(name: str) -> dict[str, str] | None:
    """The fields of a label as text, or None when name is not a label."""
    if not name.startswith(LABEL_PREFIX + "|"):
        return None
    parts = name[len(LABEL_PREFIX) + 1 :].split("|")
    return dict(part.split("=", 1) for part in parts if "=" in part)


def label_columns(name: pl.Expr) -> list[pl.Expr]:
    """Vectorised: one typed expression per label field (NULL where name is not a label)."""
    return [
        name.str.extract(rf"\|{key}=([^|]*)", 1).cast(dtype, strict=False).alias(f"label_{key}")
        for key, dtype in LABEL_FIELDS.items()
    ]
