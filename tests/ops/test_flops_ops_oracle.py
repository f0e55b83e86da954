"""Each counted op's formula against FlopCounterMode, on the shape text a real profiler writes.

One profiled run of every matmul-family and convolution op (fixed shapes) checks that the formulas
read the arguments where Kineto puts them; Hypothesis then draws shapes for each op, runs it under
FlopCounterMode (attention's GPU kernels on the meta device) and compares with the formula.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from support.host_ops import host_ops  # noqa: E402
from support.kineto_text import kineto_texts  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from tracehouse.pipeline.ops.costs import innermost_flops, op_cost, op_costs  # noqa: E402

F = torch.nn.functional
aten = torch.ops.aten


def _counted(fn) -> int:
    """FLOPs FlopCounterMode counts for one call of fn."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def _formula(name: str, *args: object) -> int:
    """FLOPs of the op's formula from the texts Kineto would write for these arguments."""
    result = op_cost(f"aten::{name}", *kineto_texts(*args))
    assert result is not None, f"aten::{name} has no formula for {kineto_texts(*args)}"
    return result[1].flops


def _workload() -> None:
    """One call of each op the fixed-shape oracle checks, forward and backward."""
    x = torch.randn(3, 5, 7, requires_grad=True)
    w = torch.randn(6, 7, requires_grad=True)
    F.linear(x, w, torch.randn(6)).sum().backward()
    torch.matmul(torch.randn(2, 3, 4, 5), torch.randn(2, 3, 5, 6))
    torch.bmm(torch.randn(4, 3, 5), torch.randn(4, 5, 2))
    torch.baddbmm(torch.randn(4, 3, 2), torch.randn(4, 3, 5), torch.randn(4, 5, 2))
    image = torch.randn(2, 3, 11, 9, requires_grad=True)
    kernel = torch.randn(8, 3, 3, 2, requires_grad=True)
    F.conv2d(image, kernel, stride=(2, 1), padding=(1, 0), dilation=(1, 2)).sum().backward()
    grouped = torch.randn(2, 4, 10, requires_grad=True)
    F.conv1d(grouped, torch.randn(6, 2, 3, requires_grad=True), groups=2, padding=1).sum().backward()
    F.conv_transpose2d(torch.randn(1, 4, 5, 5), torch.randn(4, 3, 3, 3), stride=2, padding=1)


def test_profiled_ops_match_flop_counter(tmp_path) -> None:
    torch.manual_seed(0)
    with FlopCounterMode(display=False) as counter:
        _workload()
    counted = {f"aten::{op.__name__}": n for op, n in counter.get_flop_counts()["Global"].items()}
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        _workload()
    prof.export_chrome_trace(str(tmp_path / "ops.json"))
    calls = innermost_flops(op_costs(host_ops(tmp_path / "ops.json")))
    total = calls.get_column("counted_flops").filter(
        calls.get_column("formula").is_in(
            ["mm", "addmm", "bmm", "baddbmm", "convolution", "convolution_backward"]
        )
    )
    assert {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::convolution_backward"} <= set(
        counted
    )
    assert total.sum() == sum(counted.values())
    # The trace counts a forward convolution at the backend's kernel op, FlopCounterMode at
    # aten::convolution; every other op by the same name.
    derived = dict(calls.group_by("name").agg(pl.col("counted_flops").sum()).iter_rows())
    for name in set(counted) - {"aten::convolution"}:
        assert derived[name] == counted[name], name


dims = st.integers(1, 9)


@settings(max_examples=40, deadline=None)
@given(m=dims, k=dims, n=dims, b=dims)
def test_matmul_family(m: int, k: int, n: int, b: int) -> None:
    a2, b2, a3, b3 = torch.randn(m, k), torch.randn(k, n), torch.randn(b, m, k), torch.randn(b, k, n)
    bias2, bias3 = torch.randn(m, n), torch.randn(b, m, n)
    assert _formula("mm", a2, b2) == _counted(lambda: aten.mm(a2, b2))
    assert _formula("addmm", bias2, a2, b2, 1, 1) == _counted(lambda: aten.addmm(bias2, a2, b2))
    assert _formula("bmm", a3, b3) == _counted(lambda: aten.bmm(a3, b3))
    assert _formula("baddbmm", bias3, a3, b3, 1, 1) == _counted(lambda: aten.baddbmm(bias3, a3, b3))
    assert _formula("matmul", a3, b2) == _counted(lambda: torch.matmul(a3, b2))
    assert _formula("linear", a3, b2.T.contiguous(), None) == _counted(lambda: F.linear(a3, b2.T))


@settings(max_examples=40, deadline=None)
@given(
    batch=dims, c_in=st.integers(1, 4), groups=st.integers(1, 3), c_out=st.integers(1, 4),
    size=st.integers(4, 12), kernel=st.integers(1, 4), stride=st.integers(1, 3),
    padding=st.integers(0, 2), dilation=st.integers(1, 2), transposed=st.booleans(),
)  # fmt: skip
def test_convolution_forward_and_backward(
    batch, c_in, groups, c_out, size, kernel, stride, padding, dilation, transposed
) -> None:
    x = torch.randn(batch, c_in * groups, size, size, requires_grad=True)
    shape = (c_in * groups, c_out, kernel, kernel) if transposed else (c_out * groups, c_in, kernel, kernel)
    w = torch.randn(*shape, requires_grad=True)
    args = ([stride, stride], [padding, padding], [dilation, dilation], transposed, [0, 0], groups)
    if not transposed and (size + 2 * padding - dilation * (kernel - 1) - 1) < 0:
        return
    out = aten.convolution(x, w, None, *args)
    grad = torch.randn_like(out)
    mask = [True, True, False]
    assert _formula("convolution", x, w, None, *args) == _counted(lambda: aten.convolution(x, w, None, *args))
    assert _formula("convolution_backward", grad, x, w, [0], *args, mask) == _counted(
        lambda: aten.convolution_backward(grad, x, w, [0], *args, mask)
    )


@settings(max_examples=40, deadline=None)
@given(
    b=dims, h_kv=st.integers(1, 3), group=st.integers(1, 3), s_q=dims, s_k=dims, d=st.sampled_from([8, 16])
)
def test_attention_kernels_forward_and_backward(b, h_kv, group, s_q, s_k, d) -> None:
    meta = {"device": "meta", "dtype": torch.float16}
    q, k, v = (torch.empty(b, h_kv * group, s_q, d, **meta), torch.empty(b, h_kv, s_k, d, **meta),
               torch.empty(b, h_kv, s_k, d, **meta))  # fmt: skip
    if group == 1:
        flops = _counted(lambda: aten._scaled_dot_product_efficient_attention(q, k, v, None, False))
        assert _formula("_scaled_dot_product_efficient_attention", q, k, v, None, False) == flops
        qs, ks, vs = (t.transpose(1, 2) for t in (q, k, v))
        assert _formula("_efficient_attention_forward", qs, ks, vs, None, None, None) == flops
        assert _formula("_flash_attention_forward", qs, ks, vs, None, None) == flops
    out = torch.empty(b, h_kv * group, s_q, d, **meta)
    lse = torch.empty(b, h_kv * group, s_q, **meta)
    backward = _counted(
        lambda: aten._scaled_dot_product_flash_attention_backward(
            out, q, k, v, out, lse, None, None, s_q, s_k, 0.0, False, torch.empty(2, dtype=torch.int64),
            torch.empty(0, dtype=torch.int64),
        )
    ) if group == 1 else None  # fmt: skip
    expected = 2 * b * h_kv * group * s_q * s_k * (3 * d + 2 * d)
    assert _formula("_scaled_dot_product_flash_attention_backward", out, q, k, v, out, lse) == expected
    assert (
        _formula("_scaled_dot_product_flash_attention_for_cpu_backward", out, q, k, v, out, lse) == expected
    )
    if backward is not None:
        assert backward == expected


def test_kineto_texts_match_a_real_trace_row() -> None:
    text = kineto_texts(torch.empty(2, 3), [1, 1], True, None)
    assert json.loads(text[0]) == [[2, 3], [], [], []]
    assert json.loads(text[1]) == ["float", "ScalarList", "Scalar", ""]
    assert json.loads(text[2]) == ["", "[1, 1]", "True", ""]
