"""Facts read from event names and categories (kineto_names), one rule per test."""

from __future__ import annotations

import re

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from tracehouse.pipeline.parsers.kineto.names import (
    is_comm_kernel,
    is_comm_name,
    kind_of,
    step_number,
    with_facts,
)

_PIECES = st.sampled_from(
    [
        "NCCL",
        "nccl:",
        "RcCl",
        "hccl",
        "ncclKernel",
        "NcclDevKernel",
        "Record_Param_Comms",
        "GLOO:",
        "x",
        "ſ",
        "K",
    ]
)
_KERNEL_ORACLE = re.compile(r"^(nccl|rccl|hccl)|ncclkernel|nccldevkernel", re.IGNORECASE)


@given(st.lists(st.one_of(_PIECES, st.text(max_size=5)), max_size=6).map("".join))
def test_comm_kernel_is_the_case_insensitive_regex(name: str) -> None:
    assert is_comm_kernel(name) == (_KERNEL_ORACLE.search(name) is not None)


def test_comm_kernels() -> None:
    assert is_comm_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    assert is_comm_kernel("void ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)")
    assert is_comm_kernel("RCCL_AllReduce")
    assert not is_comm_kernel("void at::native::vectorized_elementwise_kernel")
    assert not is_comm_kernel(None)


def test_host_comm_names_are_prefixes() -> None:
    for name in (
        "record_param_comms",
        "nccl:all_reduce",
        "gloo:all_gather",
        "c10d::allreduce_",
        "_c10d_functional::all_gather_into_tensor",
        "tracehouse.collective|op=all_reduce",
    ):
        assert is_comm_name(name), name
    assert not is_comm_name("record_param_comms\n")  # the whole name, not up to a newline
    assert not is_comm_name("record_param_comms_x")
    assert not is_comm_name("aten::gloo:x")
    assert not is_comm_name("gloo")  # the span prefix needs its colon
    assert not is_comm_name("aten::mm")
    assert not is_comm_name(None)


def test_step_number() -> None:
    assert step_number("ProfilerStep#12") == 12
    assert step_number("ProfilerStep#007") == 7
    assert step_number("ProfilerStep#") is None
    assert step_number("ProfilerStep#3 ") is None
    assert step_number("ProfilerStep#٣") is None  # ASCII digits only
    assert step_number("ProfilerStep#99999999999999999999") is None  # beyond int64
    assert step_number("xProfilerStep#1") is None
    assert step_number(None) is None


def test_kind_of_is_case_insensitive_with_other_as_default() -> None:
    assert kind_of("Kernel") == "kernel"
    assert kind_of("cuda_runtime") == "runtime"
    assert kind_of("Runtime") == "runtime"
    assert kind_of("made_up") == "other"
    assert kind_of(None) == "other"


def test_with_facts_joins_per_distinct_value_keeping_row_order() -> None:
    raw = pl.DataFrame(
        {"cat": ["kernel", None, "cpu_op", "kernel"], "name": ["nccl:x", "ProfilerStep#4", None, "nccl:x"]}
    )
    out = with_facts(raw)
    assert out["kind"].to_list() == ["kernel", "other", "cpu_op", "kernel"]
    assert out["_comm"].to_list() == [True, False, False, True]
    assert out["_step"].to_list() == [None, 4, None, None]
