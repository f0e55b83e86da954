"""The matmul family: mm, addmm, bmm, baddbmm, _scaled_mm (leaves) and matmul, linear (composites).

FLOPs are 2·m·k·n per product, FlopCounterMode's count (a bias or beta·self add is not counted).
"""

from __future__ import annotations

from tracehouse.pipeline.ops.signature import Cost, Signature, SignatureError, broadcast, io_bytes, numel


def _product(name: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int]:
    """(m, k, n) of a [m, k] @ [k, n] product, checking the inner dimensions."""
    (m, k), (k2, n) = a, b
    if k != k2:
        raise SignatureError(f"{name}: inner dimensions {k} and {k2} differ")
    return m, k, n


def mm(sig: Signature) -> Cost:
    """mm(a, b): 2mkn."""
    m, k, n = _product(sig.name, sig.shape(0), sig.shape(1))
    return Cost(2 * m * k * n, io_bytes(sig, [(m, n)]))


def addmm(sig: Signature) -> Cost:
    """addmm(self, a, b): 2mkn; self is read, the [m, n] result written."""
    m, k, n = _product(sig.name, sig.shape(1), sig.shape(2))
    return Cost(2 * m * k * n, io_bytes(sig, [(m, n)]))


def scaled_mm(sig: Signature) -> Cost:
    """_scaled_mm(a, b, scale_a, scale_b, ...): 2mkn, written in the output dtype (taken as a's)."""
    m, k, n = _product(sig.name, sig.shape(0), sig.shape(1))
    return Cost(2 * m * k * n, io_bytes(sig, [(m, n)]))


def _batched(name: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int]:
    (batch, m, k), (batch2, k2, n) = a, b
    if batch != batch2:
        raise SignatureError(f"{name}: batch dimensions {batch} and {batch2} differ")
    _product(name, (m, k), (k2, n))
    return batch, m, k, n


def bmm(sig: Signature) -> Cost:
    """bmm(a, b): 2·batch·mkn."""
    batch, m, k, n = _batched(sig.name, sig.shape(0), sig.shape(1))
    return Cost(2 * batch * m * k * n, io_bytes(sig, [(batch, m, n)]))


def baddbmm(sig: Signature) -> Cost:
    """baddbmm(self, a, b): 2·batch·mkn."""
    batch, m, k, n = _batched(sig.name, sig.shape(1), sig.shape(2))
    return Cost(2 * batch * m * k * n, io_bytes(sig, [(batch, m, n)]))


def matmul(sig: Signature) -> Cost:
    """matmul(a, b) with torch.matmul's rules: 1-d operands are promoted, leading dims broadcast."""
    a, b = sig.shape(0), sig.shape(1)
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    m, k, n = _product(sig.name, a2[-2:], b2[-2:])
    batch = broadcast(a2[:-2], b2[:-2])
    out = (*batch, *([m] if len(a) > 1 else []), *([n] if len(b) > 1 else []))
    return Cost(2 * numel(batch) * m * k * n, io_bytes(sig, [out]))


def linear(sig: Signature) -> Cost:
    """linear(x [..., k], w [n, k], bias): 2·rows·k·n."""
    x, (n, k) = sig.shape(0), sig.shape(1)
    if x[-1] != k:
        raise SignatureError(f"{sig.name}: input features {x[-1]} and weight {k} differ")
    rows = numel(x[:-1])
    return Cost(2 * rows * k * n, io_bytes(sig, [(*x[:-1], n)]))
