"""The collective label format: how a gloo collective carries op, bytes, dtype and group.

gloo traces have no `record_param_comms`, so `collectors/` wraps every collective it issues
in a `torch.profiler.record_function` span whose name is a label of this form:

    tracehouse.collective|op=all_reduce|pg=0|pg_desc=default_pg|seq=3|bytes=4096|dtype=float32|group_size=2

Fields are `key=value` separated by `|`; values never contain `|`. `seq` counts the
collectives this rank issued on that process group, from 0. The parser reads the labels
back (`parse_label`, or the vectorised `parsers.kineto.labels.label_columns`) to attribute
gloo spans. The prefix is part of the communication vocabulary (`comm_vocabulary`).
"""

from __future__ import annotations

from tracehouse.pipeline.common.comm_vocabulary import LABEL_PREFIX, LABEL_START

# In label order; seq, bytes and group_size are integers, the others text.
LABEL_FIELDS = ("op", "pg", "pg_desc", "seq", "bytes", "dtype", "group_size")


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
    if not name.startswith(LABEL_START):
        return None
    parts = name[len(LABEL_START) :].split("|")
    return dict(part.split("=", 1) for part in parts if "=" in part)
