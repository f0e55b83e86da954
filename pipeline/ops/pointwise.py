"""Memory-bound ops: elementwise math, norms, softmax, embedding and the optimizer's updates.

Their FLOPs follow one convention, stated per op in FLOPS_PER_ELEMENT and docs/flops.md: each
arithmetic operation or transcendental function on one element counts 1. FlopCounterMode counts
none of these (0), so they have no oracle; their bytes, not their FLOPs, bound them.
"""

from __future__ import annotations

from tracehouse.pipeline.ops.signature import Cost, Signature, SignatureError, broadcast, io_bytes, numel

# FLOPs per output element of an elementwise op (in-place `op_` and `_foreach_op` share the base
# name). lerp: a + w·(b − a); addcmul/addcdiv: self + value·(t1 ∘ t2); silu: x·σ(x) (σ = exp,
# add, div); gelu (erf form) counted as 8; pure data movement (copy_, fill_, zero_) counts 0.
FLOPS_PER_ELEMENT: dict[str, int] = {
    "add": 1, "sub": 1, "mul": 1, "div": 1, "neg": 1, "reciprocal": 1, "pow": 1,
    "sqrt": 1, "rsqrt": 1, "exp": 1, "log": 1, "abs": 1, "sign": 1, "maximum": 1, "minimum": 1,
    "clamp": 1, "clamp_min": 1, "clamp_max": 1, "relu": 1, "threshold_backward": 1,
    "sigmoid": 3, "tanh": 1, "silu": 4, "silu_backward": 7, "gelu": 8, "gelu_backward": 12,
    "lerp": 3, "addcmul": 3, "addcdiv": 3, "where": 1,
    "copy": 0, "fill": 0, "zero": 0,
}  # fmt: skip


def base_name(name: str) -> str:
    """'aten::_foreach_mul_' -> 'mul': the elementwise operation an op name stands for."""
    short = name.split("::")[-1].removeprefix("_foreach_")
    return short.rstrip("_")


def elementwise(sig: Signature) -> Cost:
    """An elementwise op: per-element FLOPs over the broadcast output, inputs read, output written."""
    shapes = sig.shapes()
    if not shapes:
        raise SignatureError(f"{sig.name}: no tensor input")
    out = shapes[0] if sig.name.endswith("_") else broadcast(*shapes)
    return Cost(FLOPS_PER_ELEMENT[base_name(sig.name)] * numel(out), io_bytes(sig, [out]))


def foreach(sig: Signature) -> Cost:
    """_foreach_op(list, ...): the base op on every tensor of the first list.

    Kineto types a TensorList argument as 'TensorList' with no element type, so the bytes are
    unknown (None) unless a single-tensor argument names the dtype.
    """
    sizes = [numel(s) for s in sig.list_shapes(0)]
    if not sizes:
        raise SignatureError(f"{sig.name}: the trace recorded no TensorList shapes")
    flops = FLOPS_PER_ELEMENT[base_name(sig.name)] * sum(sizes)
    lists = sum(1 for t in sig.types if t == "TensorList")
    itemsize = sig.first_itemsize()
    written = 0 if sig.name.endswith("_") else 1
    moved = None if itemsize is None else (lists + written) * sum(sizes) * itemsize
    return Cost(flops, moved)


# PyTorch's fused Adam(W) per parameter element: weight decay 2, first moment 3, second moment 4,
# bias corrections, sqrt and division 4, the update 2.
ADAM_FLOPS_PER_ELEMENT = 15


def fused_adam(sig: Signature) -> Cost:
    """_fused_adam_/_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, ...): reads 4 lists, writes 3."""
    sizes = sum(numel(s) for s in sig.list_shapes(0))
    itemsize = sig.first_itemsize()
    return Cost(ADAM_FLOPS_PER_ELEMENT * sizes, None if itemsize is None else 7 * sizes * itemsize)


# Norms and softmax per element: layer norm mean 1, variance 3, normalise 2, affine 2; RMS norm
# square 1, mean 1, scale 1, affine 1; softmax max 1, subtract 1, exp 1, sum 1, divide 1. Their
# backwards count twice their forward (the recomputed statistics and the two reductions).
LAYER_NORM_FLOPS, RMS_NORM_FLOPS, SOFTMAX_FLOPS = 8, 4, 5


def layer_norm(sig: Signature) -> Cost:
    """native_layer_norm(x, normalized_shape, weight, bias, eps): writes y, mean and rstd."""
    x = sig.shape(0)
    rows = numel(x[: len(x) - len(sig.ints(1))]) if sig.ints(1) else numel(x[:-1])
    return Cost(LAYER_NORM_FLOPS * numel(x), io_bytes(sig, [x, (rows,), (rows,)]))


def layer_norm_backward(sig: Signature) -> Cost:
    """native_layer_norm_backward(grad_out, x, shape, mean, rstd, weight, bias, mask): dx, dw, db."""
    x = sig.shape(1)
    written = [x] + [sig.shape(i) for i in (5, 6) if sig.is_tensor(i)]
    return Cost(2 * LAYER_NORM_FLOPS * numel(x), io_bytes(sig, written))


def rms_norm(sig: Signature) -> Cost:
    """rms_norm / _fused_rms_norm(x, normalized_shape, weight, eps): writes y."""
    x = sig.shape(0)
    return Cost(RMS_NORM_FLOPS * numel(x), io_bytes(sig, [x]))


def softmax(sig: Signature) -> Cost:
    """_softmax / _log_softmax(x, dim, half_to_float): writes a tensor of x's shape."""
    x = sig.shape(0)
    return Cost(SOFTMAX_FLOPS * numel(x), io_bytes(sig, [x]))


def softmax_backward(sig: Signature) -> Cost:
    """_softmax_backward_data / _log_softmax_backward_data(grad_out, out, dim, dtype): writes dx."""
    x = sig.shape(0)
    return Cost(2 * SOFTMAX_FLOPS * numel(x), io_bytes(sig, [x]))


def embedding(sig: Signature) -> Cost:
    """embedding(weight [V, D], indices): no FLOPs; reads the indices and the rows, writes them."""
    (_, dim), indices = sig.shape(0), sig.shape(1)
    rows = numel(indices) * dim * sig.itemsize(0)
    return Cost(0, numel(indices) * sig.itemsize(1) + 2 * rows)


def embedding_backward(sig: Signature) -> Cost:
    """embedding_dense_backward(grad [..., D], indices, num_weights, ...): one add per grad element."""
    grad = sig.shape(0)
    num_weights = int(sig.concrete[2]) if len(sig.concrete) > 2 and sig.concrete[2] else 0
    return Cost(numel(grad), io_bytes(sig, [(num_weights, grad[-1])]))
