"""Scaled dot-product attention, forward and backward, in each of its kernels' layouts.

FLOPs are FlopCounterMode's: the two batched products of the forward (2·b·h·sq·sk·(dq + dv)) and
the five of the backward (2·b·h·sq·sk·(3·dq + 2·dv)), query heads h (GQA's key/value heads are
broadcast), with no saving for a causal mask. Bytes: q, k, v (and grad_out, out, logsumexp in the
backward) read once, the output (or dq, dk, dv) written once; the score matrix never reaches
memory in these fused kernels.
"""

from __future__ import annotations

from tracehouse.pipeline.ops.signature import Cost, Shape, Signature, SignatureError, io_bytes


def _heads_first(shape: Shape) -> Shape:
    """(b, s, h, d) -> (b, h, s, d): the _flash/_efficient_attention kernels take sequence first."""
    b, s, h, d = shape
    return b, h, s, d


def _check(name: str, q: Shape, k: Shape, v: Shape) -> tuple[int, int, int, int, int, int]:
    """(b, h_q, s_q, s_k, d_q, d_v) of a (b, h, s, d) query, key and value."""
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise SignatureError(f"{name}: query, key and value must be 4-d, got {q}, {k}, {v}")
    b, h_q, s_q, d_q = q
    b2, h_kv, s_k, d_k = k
    b3, h_v, s_v, d_v = v
    if not (b == b2 == b3 and h_kv == h_v and s_k == s_v and d_q == d_k and h_q % h_kv == 0):
        raise SignatureError(f"{name}: query {q}, key {k} and value {v} do not fit")
    return b, h_q, s_q, s_k, d_q, d_v


def forward_flops(q: Shape, k: Shape, v: Shape, name: str = "attention") -> int:
    """FLOPs of one attention forward over (b, h, s, d) tensors."""
    b, h, s_q, s_k, d_q, d_v = _check(name, q, k, v)
    return 2 * b * h * s_q * s_k * (d_q + d_v)


def backward_flops(q: Shape, k: Shape, v: Shape, name: str = "attention backward") -> int:
    """FLOPs of one attention backward over (b, h, s, d) tensors (scores recomputed)."""
    b, h, s_q, s_k, d_q, d_v = _check(name, q, k, v)
    return 2 * b * h * s_q * s_k * (3 * d_q + 2 * d_v)


def sdpa(sig: Signature) -> Cost:
    """scaled_dot_product_attention and its _scaled_dot_product_* kernels: (q, k, v, ...) as (b, h, s, d)."""
    q, k, v = sig.shape(0), sig.shape(1), sig.shape(2)
    out = (*q[:3], v[3])
    return Cost(forward_flops(q, k, v, sig.name), io_bytes(sig, [out]))


def sdpa_backward(sig: Signature) -> Cost:
    """_scaled_dot_product_*_backward(grad_out, q, k, v, out, logsumexp, ...): writes dq, dk, dv."""
    q, k, v = sig.shape(1), sig.shape(2), sig.shape(3)
    return Cost(backward_flops(q, k, v, sig.name), io_bytes(sig, [q, k, v]))


def _unpadded(sig: Signature, first: int) -> None:
    """Refuse a nested (varlen) call: its per-sequence lengths are in a tensor the trace lacks."""
    if sig.is_tensor(first) and sig.shape(first):
        raise SignatureError(f"{sig.name}: variable-length (cum_seq) attention has no formula from shapes")


def flash_forward(sig: Signature) -> Cost:
    """_flash_attention_forward / _efficient_attention_forward(q, k, v, ...) in (b, s, h, d)."""
    _unpadded(sig, 3 if sig.name.endswith("_flash_attention_forward") else 4)
    q, k, v = (_heads_first(sig.shape(i)) for i in range(3))
    out = (q[0], q[2], q[1], v[3])
    return Cost(forward_flops(q, k, v, sig.name), io_bytes(sig, [out]))


def flash_backward(sig: Signature) -> Cost:
    """_flash_attention_backward / _efficient_attention_backward(grad_out, q, k, v, ...) in (b, s, h, d)."""
    q, k, v = (_heads_first(sig.shape(i)) for i in (1, 2, 3))
    written = [sig.shape(1), sig.shape(2), sig.shape(3)]
    return Cost(backward_flops(q, k, v, sig.name), io_bytes(sig, written))
