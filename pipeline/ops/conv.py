"""Convolution forward (the aten entry points and each backend's kernel op) and backward.

FLOPs are FlopCounterMode's: 2 · batch · c_out · (c_in / groups) · prod(kernel) · prod(output
spatial) (for a transposed convolution: the input's spatial size); the bias add is not counted.
The output's spatial size comes from the stride, padding and dilation in `Concrete Inputs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracehouse.pipeline.ops.signature import Cost, Shape, Signature, SignatureError, io_bytes


@dataclass(frozen=True)
class ConvArgs:
    """Where an op's stride, padding, dilation, transposed and output_padding arguments sit."""

    stride: int
    padding: int
    dilation: int
    transposed: int | None = None
    output_padding: int | None = None


# aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
# groups) and its relatives; the backend kernels take padding before stride.
CONV_ARGS: dict[str, ConvArgs] = {
    "aten::convolution": ConvArgs(3, 4, 5, 6, 7),
    "aten::_convolution": ConvArgs(3, 4, 5, 6, 7),
    "aten::convolution_overrideable": ConvArgs(3, 4, 5, 6, 7),
    "aten::mkldnn_convolution": ConvArgs(4, 3, 5),
    "aten::miopen_convolution": ConvArgs(4, 3, 5),
    "aten::cudnn_convolution": ConvArgs(3, 2, 4),
    "aten::_slow_conv2d_forward": ConvArgs(4, 5, -1),
}


def conv_flops(x: Shape, w: Shape, out: Shape, transposed: bool) -> int:
    """2 · batch · c_out · c_in_per_group · prod(kernel) · prod(spatial)."""
    c_out, c_in, *kernel = w
    spatial = (x if transposed else out)[2:]
    return 2 * x[0] * c_out * c_in * math.prod(kernel) * math.prod(spatial)


def _per_dim(values: list[int], n: int, default: int) -> list[int]:
    """A per-spatial-dim argument (a one-element list applies to every dim)."""
    if not values:
        return [default] * n
    return values * n if len(values) == 1 else values


def output_shape(sig: Signature, args: ConvArgs) -> tuple[Shape, bool]:
    """The output shape and whether the convolution is transposed."""
    x, w = sig.shape(0), sig.shape(1)
    n = len(x) - 2
    if n < 1 or len(w) != len(x):
        raise SignatureError(f"{sig.name}: input {x} and weight {w} are not a convolution")
    stride = _per_dim(sig.ints(args.stride), n, 1)
    padding = _per_dim(sig.ints(args.padding), n, 0)
    dilation = _per_dim(sig.ints(args.dilation), n, 1) if args.dilation >= 0 else [1] * n
    transposed = bool(sig.flag(args.transposed)) if args.transposed is not None else False
    kernel = w[2:]
    if transposed:
        extra = _per_dim(sig.ints(args.output_padding), n, 0) if args.output_padding else [0] * n
        spatial = [
            (x[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + extra[i] + 1
            for i in range(n)
        ]
        return (x[0], w[1] * _groups(sig), *spatial), True
    spatial = [
        (x[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(n)
    ]
    return (x[0], w[0], *spatial), False


def _groups(sig: Signature) -> int:
    """groups of an aten::convolution-style call (argument 8), 1 when not recorded."""
    text = sig.concrete[8] if len(sig.concrete) > 8 else ""
    return int(text) if text else 1


def convolution(sig: Signature) -> Cost:
    """A convolution forward: its output shape from the recorded stride/padding/dilation."""
    out, transposed = output_shape(sig, CONV_ARGS[sig.name])
    return Cost(conv_flops(sig.shape(0), sig.shape(1), out, transposed), io_bytes(sig, [out]))


def convolution_backward(sig: Signature) -> Cost:
    """convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): grad_input and grad_weight as convolutions."""
    grad_out, x, w = sig.shape(0), sig.shape(1), sig.shape(2)
    transposed = bool(sig.flag(7))
    mask = sig.flags(10) or [True, True, True]

    def swap(shape: Shape) -> Shape:
        return (shape[1], shape[0], *shape[2:])

    flops, written = 0, []
    if mask[0]:
        flops += conv_flops(grad_out, w, x, not transposed)
        written.append(x)
    if mask[1]:
        pair = (swap(grad_out), swap(x)) if transposed else (swap(x), swap(grad_out))
        flops += conv_flops(pair[0], pair[1], swap(w), False)
        written.append(w)
    if len(mask) > 2 and mask[2]:
        written.append((w[1] if transposed else w[0],))
    return Cost(flops, io_bytes(sig, written))
