"""comm_prefilter (the scanner's once-per-name test) answers exactly as the `(?i)` COMM_PREFILTER regex."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tracehouse.pipeline.parsers.kineto_commargs import COMM_PREFILTER, comm_prefilter

_PIECES = st.sampled_from(
    ["NCCL", "nccl:", "RcCl", "hccl", "Record_Param_Comms", "GLOO:", "C10D", "gloo", "x", "ſ", "K"]
)


@given(st.lists(st.one_of(_PIECES, st.text(max_size=5)), max_size=6).map("".join))
def test_same_answer_as_case_insensitive_regex(name: str) -> None:
    assert comm_prefilter(name) == (COMM_PREFILTER.search(name) is not None)


def test_known_names() -> None:
    assert comm_prefilter("ncclDevKernel_AllReduce_Sum_f32_RING_LL")
    assert comm_prefilter("TraceHouse.Collective|op=all_reduce")
    assert comm_prefilter("c10d::allreduce_")
    assert not comm_prefilter("aten::mm")
    assert not comm_prefilter("gloo")  # the span prefix needs its colon
