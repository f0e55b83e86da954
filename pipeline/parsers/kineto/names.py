"""What an event's category and name say, decided once per distinct string.

* `kind_of(cat)`: the normalised kind (`KIND_BY_CATEGORY`, case-insensitive; unknown or
  missing: "other").
* `is_comm_name(name)`: the event can feed COLLECTIVES: a communication kernel
  (`is_comm_kernel`: names starting nccl/rccl/hccl, or containing ncclKernel/ncclDevKernel,
  case-insensitive), a host communication op/annotation (`record_param_comms`, `nccl:*`,
  `gloo:*`, `c10d::*`, `_c10d_functional::*`) or a tracehouse label; the patterns are those
  of `common.comm_vocabulary`, which the SQL reads too.
* `step_number(name)`: N of `ProfilerStep#N` (ASCII digits, within int64), else None.

A trace holds a few hundred to a few thousand distinct names among tens of thousands of
events, so these are plain Python functions applied per distinct value: the C scanner calls
`is_comm_name` as it meets each new name; the msgspec path joins the distinct values back.
"""

from __future__ import annotations

import re

import polars as pl
from tracehouse.pipeline.common.comm_vocabulary import is_comm_kernel, is_host_comm_op, is_label
from tracehouse.pipeline.parsers.kineto.events import INT64_MAX
from tracehouse.pipeline.warehouse.schema import KIND_BY_CATEGORY, OTHER_KIND

_STEP = re.compile(r"ProfilerStep#([0-9]+)\Z")
_KINDS = {cat.lower(): kind for cat, kind in KIND_BY_CATEGORY.items()}


def kind_of(cat: str | None) -> str:
    """The normalised event kind of a category."""
    return OTHER_KIND if cat is None else _KINDS.get(cat.lower(), OTHER_KIND)


def is_comm_name(name: str | None) -> bool:
    """Whether an event of this name can feed COLLECTIVES."""
    return is_host_comm_op(name) or is_label(name) or is_comm_kernel(name)


def step_number(name: str | None) -> int | None:
    """N of a `ProfilerStep#N` name, else None."""
    if name is None or not name.startswith("ProfilerStep#"):
        return None
    match = _STEP.match(name)
    if match is None:
        return None
    digits = match.group(1).lstrip("0") or "0"  # 19 digits hold every int64; int() refuses 4,300+
    return int(digits) if len(digits) <= 19 and int(digits) <= INT64_MAX else None


def category_facts(cats: list[str | None]) -> pl.DataFrame:
    """cat -> kind, one row per given category."""
    return pl.DataFrame(
        {"cat": cats, "kind": [kind_of(c) for c in cats]}, schema={"cat": pl.String, "kind": pl.String}
    )


def name_facts(names: list[str | None], comm: list[bool] | None = None) -> pl.DataFrame:
    """name -> `_comm`, `_step`, one row per given name (`comm`: is_comm_name already evaluated)."""
    return pl.DataFrame(
        {
            "name": names,
            "_comm": comm if comm is not None else [is_comm_name(n) for n in names],
            "_step": [step_number(n) for n in names],
        },
        schema={"name": pl.String, "_comm": pl.Boolean, "_step": pl.Int64},
    )


def with_facts(raw: pl.DataFrame) -> pl.DataFrame:
    """raw with `kind`, `_comm` and `_step` joined from its distinct categories and names."""
    cats = category_facts(raw["cat"].unique().to_list())
    names = name_facts(raw["name"].unique().to_list())
    joined = raw.join(cats, on="cat", how="left", nulls_equal=True, maintain_order="left")
    return joined.join(names, on="name", how="left", nulls_equal=True, maintain_order="left")
