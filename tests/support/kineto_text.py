"""The `Input Dims`, `Input type` and `Concrete Inputs` texts Kineto writes for an op's arguments.

Test-only, for Hypothesis: it writes what the profiler writes for tensors, tensor lists, ints,
int lists, bools and None, so a formula can be checked on shapes no trace holds.
"""

from __future__ import annotations

import json

import torch

# c10 scalar type names as Kineto writes them.
TYPE_NAMES = {torch.float32: "float", torch.float64: "double", torch.bfloat16: "c10::BFloat16",
              torch.float16: "c10::Half", torch.int64: "long int", torch.bool: "bool"}  # fmt: skip


def _one(arg: object) -> tuple[object, str, str]:
    """(dims, type, concrete) of one argument."""
    if isinstance(arg, torch.Tensor):
        return list(arg.shape), TYPE_NAMES[arg.dtype], ""
    if isinstance(arg, (list, tuple)) and arg and isinstance(arg[0], torch.Tensor):
        return [list(t.shape) for t in arg], "TensorList", ""
    if isinstance(arg, bool):
        return [], "Scalar", str(arg)
    if isinstance(arg, (int, float)):
        return [], "Scalar", str(arg)
    if isinstance(arg, (list, tuple)):
        return [], "ScalarList", "[" + ", ".join(str(v) for v in arg) + "]"
    return [], "", ""


def kineto_texts(*args: object) -> tuple[str, str, str]:
    """The three JSON texts of one call with these positional arguments."""
    parts = [_one(a) for a in args]
    return tuple(json.dumps([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]
