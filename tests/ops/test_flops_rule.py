"""The once-only rule and the no-formula rule on hand-built call trees, and the formulas on
shape texts taken verbatim from the sample and shared traces, with hand-computed values."""

from __future__ import annotations

import polars as pl
import pytest
from tracehouse.pipeline.ops.costs import SIGNATURE_COLUMNS, innermost_flops, op_cost, op_costs


def _calls(rows: list[tuple[int, int | None, int | None, int | None]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=["id", "parent_id", "flops", "bytes"], orient="row")


def test_flops_counted_once_at_the_innermost_call_that_does_work() -> None:
    # linear(1) > matmul(2) > mm(3) > copy_(4, no FLOPs); embedding(5) > index_select(6, no formula)
    calls = _calls(
        [
            (1, None, 100, 50),
            (2, 1, 100, 50),
            (3, 2, 100, 40),
            (4, 3, 0, 8),
            (5, None, 0, 30),
            (6, 5, None, None),
        ]
    )
    out = innermost_flops(calls).sort("id")
    assert out.get_column("counted_flops").to_list() == [0, 0, 100, 0, 0, None]
    assert out.get_column("counted_bytes").to_list() == [0, 0, 40, 0, 30, None]


def test_a_composite_keeps_its_flops_when_no_descendant_has_a_formula() -> None:
    calls = _calls([(1, None, 100, 50), (2, 1, None, None), (3, 2, 0, 10)])
    out = innermost_flops(calls).sort("id")
    assert out.get_column("counted_flops").to_list() == [100, None, 0]
    # the copy inside the counted linear moves bytes linear's lower bound already holds
    assert out.get_column("counted_bytes").to_list() == [50, None, 0]


def test_real_shape_texts_hand_computed() -> None:
    # aten::addmm from tracelens/h100_bert_small: bias [512], x [141, 512], w [512, 512], bf16
    name, cost = op_cost("aten::addmm", "[[512], [141, 512], [512, 512], [], []]",
                         '["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"]',
                         '["", "", "", "1", "1"]')  # fmt: skip
    assert name == "addmm"
    assert cost.flops == 2 * 141 * 512 * 512
    assert cost.bytes == 2 * (512 + 141 * 512 + 512 * 512 + 141 * 512)
    # aten::_flash_attention_forward from the same trace: (b, s, h, d) = (1, 141, 8, 64)
    q = "[1, 141, 8, 64]"
    _, cost = op_cost("aten::_flash_attention_forward", f"[{q}, {q}, {q}, [], [], [], []]",
                      '["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "", "", "Scalar", "Scalar"]',
                      '["", "", "", "", "", "141", "141"]')  # fmt: skip
    assert cost.flops == 2 * 8 * 141 * 141 * (64 + 64)
    assert cost.bytes == 4 * 141 * 8 * 64 * 2
    # aten::miopen_convolution from tracelens/mi300_ddp_rank0_of8: padding [1, 1] before stride [2, 2]
    bf16, lists, scalars = '"c10::BFloat16"', '"ScalarList", ' * 3, '"Scalar", ' * 3
    _, cost = op_cost(
        "aten::miopen_convolution",
        "[[10, 256, 14, 14], [512, 256, 3, 3], [], [], [], [], [], [], []]",
        f'[{bf16}, {bf16}, "", {lists}{scalars}]'.replace(", ]", "]"),
        '["", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False"]',
    )
    assert cost.flops == 2 * 10 * 512 * 256 * 9 * 7 * 7
    # aten::lerp_ (AdamW's first moment) from the sample study: 3 FLOPs per element, in place
    _, cost = op_cost("aten::lerp_", "[[1024, 128], [1024, 128], []]", '["float", "float", "Scalar"]',
                      '["", "", "0.1"]')  # fmt: skip
    assert (cost.flops, cost.bytes) == (3 * 1024 * 128, 3 * 4 * 1024 * 128)


def test_foreach_without_recorded_shapes_has_no_formula_not_zero() -> None:
    # aten::_foreach_add_ from tracelens/mi300_ddp_rank0_of8: the TensorLists' shapes are not recorded
    frame = pl.DataFrame(
        {
            "name": ["aten::_foreach_add_", "aten::view"],
            "input_dims": ["[[], [], []]", "[[4, 4], []]"],
            "input_types": ['["TensorList", "TensorList", "Scalar"]', '["float", "ScalarList"]'],
            "concrete_inputs": ['["", "", "-0.001"]', '["", "[16]"]'],
        }
    )
    out = op_costs(frame)
    assert out.get_column("formula").to_list() == [None, None]
    assert out.get_column("flops").to_list() == [None, None]


def test_foreach_with_shapes_counts_every_tensor_and_leaves_bytes_unknown() -> None:
    _, cost = op_cost("aten::_foreach_mul_", "[[[3, 4], [5]], []]", '["TensorList", "Scalar"]', '["", "0.9"]')
    assert cost.flops == 17
    assert cost.bytes is None


def test_docs_table_names_every_formula_and_every_op() -> None:
    from pathlib import Path

    from tracehouse.pipeline.ops.costs import CATEGORY_OF, FORMULA_OF

    doc = (Path(__file__).resolve().parents[2] / "docs/flops.md").read_text()
    table = doc.split("## Formulas")[1].split("\n## ")[0]
    rows = [
        line
        for line in table.splitlines()
        if line.startswith("| ") and not line.startswith(("| op ", "| ---"))
    ]
    named = {line.split("|")[2].strip() for line in rows}
    assert named == set(CATEGORY_OF)
    listed = " ".join(line.split("|")[1] for line in rows)
    # every op with a formula appears in the table's op column (elementwise bases by name)
    for op in FORMULA_OF:
        short = op.removeprefix("aten::").removeprefix("_foreach_").rstrip("_")
        assert short in listed, op


def test_ops_without_formula_are_counted_and_named() -> None:
    from tracehouse.pipeline.ops.costs import without_formula

    mm = ("aten::mm", "[[2, 3], [3, 4]]", '["float", "float"]', '["", ""]')
    view = ("aten::view", "[[4, 4], []]", '["float", "ScalarList"]', '["", "[16]"]')
    bare = ("aten::addmm", None, None, None)  # a formula, but no shapes recorded
    frame = pl.DataFrame([mm, view, view, bare], schema=list(SIGNATURE_COLUMNS), orient="row")
    assert without_formula(op_costs(frame)).rows() == [("aten::view", 2), ("aten::addmm", 1)]


def test_a_cost_beyond_64_bits_does_not_fit_and_the_trace_still_parses(tmp_path) -> None:
    """Shapes no real call has (a damaged trace; found by the fuzzer): FLOPs past int64 make the
    formula not fit (NULL, as for missing shapes), never an error that loses the rank."""
    from support.tracebuilder import cpu_op, step, write_trace
    from tracehouse.pipeline.parsers.kineto.parse import parse_trace

    huge = 1 << 40
    args = {"Input Dims": [[huge, huge], [huge, huge]], "Input type": ["float", "float"]}
    fits = {"Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"]}
    events = [step(1, 0, 100), cpu_op("aten::mm", 10, 5, args=args), cpu_op("aten::mm", 20, 5, args=fits)]
    write_trace(tmp_path / "t.json", events, distributed_info={"rank": 0})
    calls = parse_trace(tmp_path / "t.json").op_calls.sort("op_id")
    assert calls["flops"].to_list() == [None, 2 * 4 * 8 * 16]
    assert op_cost("aten::mm", "[[4, 8], [8, 16]]", '["float", "float"]', None)[1].flops == 2 * 4 * 8 * 16


def test_a_dimension_that_is_no_integer_does_not_fit() -> None:
    """A damaged trace's dimension read as infinity or NaN (found by the fuzzer: a number past
    float range) makes the formula not fit, never an OverflowError."""
    from tracehouse.pipeline.ops.signature import Signature, SignatureError

    for bad in (float("inf"), float("nan"), "x"):
        sig = Signature(name="aten::mm", dims=((bad, 4), (4, 8)), types=("float", "float"), concrete=("", ""))
        with pytest.raises(SignatureError, match="is not an integer"):
            sig.shape(0)
