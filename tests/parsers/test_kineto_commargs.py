"""The column-wise comm args and collective fields against straightforward per-row readings.

`commargs.comm_args_rows` / `comm_args_frame` and `collectives._fields` work on whole columns
(pyarrow, numpy, one call per distinct value); the references here read one row at a time, as
the rules in their docstrings say, with Python's unbounded integers.
"""

from __future__ import annotations

from typing import Any

import msgspec
import polars as pl
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from tracehouse.pipeline.common.comm_names import dtype_name, dtype_size, kernel_op, op_name
from tracehouse.pipeline.parsers.kineto import collectives
from tracehouse.pipeline.parsers.kineto.commargs import (
    ARGS,
    COMM_ARGS,
    RAW_ARGS,
    comm_args_frame,
    comm_args_rows,
    input_dtype,
    input_numel,
    per_distinct,
)
from tracehouse.pipeline.parsers.kineto.limits import int32_or_none, int64_or_none
from tracehouse.pipeline.parsers.kineto.structs import ARG_FIELDS, LooseEvent

KEYS = {attr: key for attr, key, _ in ARG_FIELDS}
EDGES = [0, 1, -1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**70]
INTS = st.sampled_from(EDGES) | st.integers(min_value=-(2**66), max_value=2**66)
TEXTS = st.sampled_from(["", "allreduce", "_allgather_base", "Float", "c10::BFloat16", "long int", "7"])
# What msgspec decodes an `Any` arg to: any JSON value.
JSON = st.recursive(
    st.none() | st.booleans() | INTS | st.floats(allow_nan=False) | TEXTS | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=6,
)
SHAPE = st.lists(st.integers(min_value=-3, max_value=2**40), max_size=3)
DIMS = st.lists(st.one_of(SHAPE, st.lists(SHAPE, max_size=3), INTS, TEXTS), max_size=4)
TYPES = st.lists(
    st.sampled_from(["", "Scalar", "TensorList", "float", "c10::Half", "ScalarList"]), max_size=4
)
# Raw JSON text as the decoders hold it (bytes), valid or not.
RAW = (
    st.none() | (DIMS | TYPES | JSON).map(msgspec.json.encode) | st.sampled_from([b"[1,", b'["\xff"]', b"{"])
)


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else str(v) if type(v) is int else None


def _decoded(raw: bytes | None) -> Any:
    try:
        return None if raw is None else msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None


def reference_row(row: int, args: dict[str, Any]) -> dict[str, Any]:
    """COMM_ARGS of one event, read as the docstrings say."""
    return {
        "_row": row,
        **{a: _str(args[a]) for a in ("collective_name", "dtype", "pg_name", "pg_desc")},
        **{a: int64_or_none(args[a]) for a in ("in_nelems", "out_nelems", "seq", "sequence_number")},
        "group_size": int32_or_none(args["group_size"]),
        "numel": int64_or_none(input_numel(_decoded(args["input_dims"]))),
        "input_type": input_dtype(_decoded(args["input_type"])),
    }


def reference_frame(rows: list[int], args: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame([reference_row(r, a) for r, a in zip(rows, args, strict=True)], schema=COMM_ARGS)


EVENT_ARGS = st.fixed_dictionaries({a: RAW if a in RAW_ARGS else JSON for a in ARGS})


@settings(max_examples=300)
@given(args=st.lists(EVENT_ARGS, max_size=12), gap=st.integers(min_value=1, max_value=3))
def test_comm_args_rows_match_a_per_row_reading(args: list[dict[str, Any]], gap: int) -> None:
    rows = [i * gap for i in range(len(args))]
    by_row = dict(zip(rows, args, strict=True))
    got = comm_args_rows(rows, lambda row, attr: by_row[row][attr])
    assert got.schema == COMM_ARGS
    assert got.equals(reference_frame(rows, args), null_equal=True)


@settings(max_examples=150)
@given(args=st.lists(EVENT_ARGS, min_size=1, max_size=8))
def test_comm_args_frame_reads_msgspec_structs_as_the_rows_say(args: list[dict[str, Any]]) -> None:
    """The msgspec path: decoded Structs, `Input Dims`/`Input type` as msgspec.Raw."""
    events = [
        {
            "ph": "X",
            "name": "nccl:all_reduce",
            "args": {KEYS[a]: _decoded(v) if a in RAW_ARGS else v for a, v in e.items()},
        }
        for e in args
    ]
    xs = msgspec.json.decode(msgspec.json.encode(events), type=list[LooseEvent])
    raw = pl.DataFrame({"_comm": [True] * len(xs)})
    rows = list(range(len(xs)))
    held = [{a: getattr(x.args, a) for a in ARGS} for x in xs]
    for one in held:
        one.update({a: None if one[a] is None else bytes(one[a]) for a in RAW_ARGS})
    assert comm_args_frame(xs, raw).equals(reference_frame(rows, held), null_equal=True)


@given(values=st.lists(st.none() | TEXTS, max_size=20))
def test_per_distinct_is_the_function_of_each_value(values: list[str | None]) -> None:
    got = per_distinct(pa.array(values, type=pa.large_string()), {"op": (op_name, pa.large_string())})
    assert got["op"].to_pylist() == [None if v is None else op_name(v) for v in values]


# collectives._fields: each row's event (its own args when `own`), record_param_comms and annotation.
NAMES = st.sampled_from(
    ["ncclDevKernel_AllGather_RING_LL", "ncclKernel_SendRecv", "ncclDevKernel_Generic", "nccl:all_gather",
     "nccl:_reduce_scatter_base", "nccl:broadcast", "nccl:weird"]
)  # fmt: skip
OPS = st.none() | st.sampled_from(["allreduce", "all_gather_into_tensor", "_allgather_base", "", "odd"])
DTYPES = st.none() | st.sampled_from(
    ["Float", "c10::BFloat16", "", "unknown", "long int", "c10::complex<double>"]
)
SIZES = st.none() | INTS.filter(lambda v: int64_or_none(v) is not None)
GROUP = st.none() | st.integers(min_value=-(2**31), max_value=2**31 - 1) | st.sampled_from([0, 2, 8])
TEXT_OR_NONE = st.none() | st.sampled_from(["0", "1", "default_pg", ""])
EVENT_KEYS = {
    "name": NAMES,
    "collective_name": OPS,
    "in_nelems": SIZES,
    "out_nelems": SIZES,
    "group_size": GROUP,
    "dtype": DTYPES,
    "pg_name": TEXT_OR_NONE,
    "pg_desc": TEXT_OR_NONE,
    "seq": SIZES,
    "input_type": DTYPES,
    "numel": SIZES,
}
ARGS_OF_EVENT = st.fixed_dictionaries(EVENT_KEYS)
SINGLE = st.fixed_dictionaries({"process_group": TEXT_OR_NONE, "pg_desc": TEXT_OR_NONE, "group_size": GROUP})


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _of(fn: Any, value: Any) -> Any:
    return None if value is None else fn(value)


def reference_fields(event: dict, rpc: dict, ann: dict, single: dict, own: bool) -> dict[str, Any]:
    """One row's fields, as collectives' docstring says (Python integers: exact bytes)."""

    def pick(key: str) -> Any:
        return _first(event[key] if own else None, rpc.get(key))

    op = _first(
        _of(op_name, pick("collective_name")),
        _of(op_name, ann.get("name")),
        _of(kernel_op if own else op_name, event["name"]),
    )
    dtype = _of(dtype_name, _first(pick("dtype"), ann.get("input_type")))
    group_size = _first(pick("group_size"), single["group_size"])
    shape = ann.get("numel")
    if shape is not None and op == "all_gather":
        shape = None if group_size is None else shape * group_size
    sizes = [n for n in (pick("in_nelems"), pick("out_nelems")) if n is not None]
    nelems, width = _first(max(sizes, default=None), shape), _of(dtype_size, dtype)
    return {
        "op": op,
        "process_group": _first(pick("pg_name"), single["process_group"]),
        "pg_desc": _first(pick("pg_desc"), single["pg_desc"]),
        "seq": pick("seq"),
        "bytes": int64_or_none(None if nelems is None or width is None else nelems * width),
        "dtype": dtype,
        "group_size": group_size,
    }


def _columns(rows: list[dict], prefix: str) -> dict[str, Any]:
    """The rows as `_fields` reads them: raw columns plus what collectives.DERIVED derives per row."""
    cols = {}
    for key in EVENT_KEYS:
        typ = (
            pa.large_string()
            if key in ("name", "collective_name", "dtype", "pg_name", "pg_desc", "input_type")
            else pa.int64()
        )
        cols[prefix + key] = pa.array([r.get(key) for r in rows], type=typ)
    for source, derived in collectives.DERIVED.items():
        for out, (fn, typ) in derived.items():
            cols[prefix + out] = pa.array([_of(fn, r.get(source)) for r in rows], type=typ)
    return cols


@settings(max_examples=300)
@given(
    rows=st.lists(
        st.tuples(ARGS_OF_EVENT, st.none() | ARGS_OF_EVENT, st.none() | ARGS_OF_EVENT), max_size=10
    ),
    single=SINGLE,
    own=st.booleans(),
)
def test_collective_fields_match_a_per_row_reference(rows: list[tuple], single: dict, own: bool) -> None:
    events = [e for e, _, _ in rows]
    rpcs = [r or {} for _, r, _ in rows]
    anns = [(a or {}) if own else e for e, _, a in rows]  # an annotation row is its own annotation
    cols = {**_columns(events, ""), **_columns(rpcs, "rpc_"), **_columns(anns, "ann_")}
    got = collectives._fields(cols, single, own)
    expected = [reference_fields(e, r, a, single, own) for e, r, a in zip(events, rpcs, anns, strict=True)]
    for field in expected[0] if expected else ():
        assert pl.Series(got[field]).to_list() == [row[field] for row in expected], field
