"""The parser's arrow values built without pyarrow's conversion (`parsers.kineto.arrow`).

pyarrow imports pandas the first time it converts a Python value; the parse must not, so that a
threaded ingest does not stall on that import. The helpers must give what pyarrow's own
conversion gives.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.testdata import SAMPLE_TRACES, SHARED_DATA
from tracehouse.pipeline.parsers.kineto import arrow

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.lists(st.one_of(st.none(), INT64), max_size=40))
def test_array_of_ints_is_pyarrows(values: list[int | None]) -> None:
    assert arrow.array(values, pa.int64()).equals(pa.array(values, type=pa.int64()))


@given(st.lists(st.one_of(st.none(), st.text(max_size=8)), max_size=40))
def test_array_of_texts_is_pyarrows(values: list[str | None]) -> None:
    for dtype in (pa.large_string(), pa.string()):
        assert arrow.array(values, dtype).equals(pa.array(values, type=dtype))


@given(st.lists(st.one_of(st.none(), st.binary(max_size=8)), max_size=40))
def test_array_of_bytes_is_pyarrows(values: list[bytes | None]) -> None:
    assert arrow.array(values, pa.large_binary()).equals(pa.array(values, type=pa.large_binary()))


@given(st.lists(st.tuples(INT64, st.booleans()), max_size=70))
def test_int64s_with_a_mask_is_pyarrows(pairs: list[tuple[int, bool]]) -> None:
    values = np.array([v for v, _ in pairs], dtype=np.int64)
    valid = np.array([ok for _, ok in pairs], dtype=bool)
    built = arrow.int64s(values, valid)
    built.validate(full=True)
    assert built.equals(pa.array(values, type=pa.int64(), mask=~valid))
    assert arrow.int64s(values).equals(pa.array(values, type=pa.int64()))


@given(st.lists(st.booleans(), max_size=70))
def test_bools_and_numpy_round_trip(flags: list[bool]) -> None:
    mask = np.array(flags, dtype=bool)
    built = arrow.bools(mask)
    built.validate(full=True)
    assert built.equals(pa.array(flags, type=pa.bool_()))
    assert arrow.numpy(built).tolist() == flags
    assert arrow.numpy(pa.chunked_array([built, built], type=pa.bool_())).tolist() == flags * 2


def test_scalar_is_pyarrows() -> None:
    text = pa.large_string()
    assert arrow.scalar("all_gather", text).equals(pa.scalar("all_gather", type=text))
    assert arrow.scalar(0, pa.int64()).equals(pa.scalar(0, type=pa.int64()))
    assert arrow.scalar(False, pa.bool_()).equals(pa.scalar(False, type=pa.bool_()))


_PARSE_AND_REPORT = """
import sys
from tracehouse.pipeline.parsers.kineto.parse import parse_trace
for path in sys.argv[1:]:
    parsed = parse_trace(path)
    assert parsed.events.height > 0, path
print("pandas" in sys.modules)
"""


def _traces() -> list[str]:
    traces = sorted(str(p) for p in SAMPLE_TRACES.rglob("*.pt.trace.json*"))
    if SHARED_DATA.is_dir():  # GPU traces with NCCL kernels, record_param_comms and annotations
        traces += [
            str(SHARED_DATA / "traces" / name)
            for name in (
                "tracelens/mi300_ddp_rank0_of8.json.gz",
                "hta/nccl_parser_config_rank0.json.gz",
                "hta/pair_sampled_rank-0.json.gz",
            )
        ]
    return traces


def test_the_parse_does_not_import_pandas() -> None:
    traces = _traces()
    if not traces:
        pytest.skip("no sample or shared traces to parse")
    done = subprocess.run(
        [sys.executable, "-c", _PARSE_AND_REPORT, *traces], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False", "parsing imported pandas (a pyarrow conversion of Python values)"
