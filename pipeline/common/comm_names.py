"""Normalised collective op names and dtypes, whatever spelling a trace uses.

Ops: `c10d::allreduce_`, `nccl:_all_gather_base`, `gloo:all_gather`, `Collective name:
reduce_scatter_tensor`, `ncclKernel_AllReduce_RING_LL_Sum_float` ... all become one of
all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send, recv, reduce, gather,
scatter, barrier, send_recv (an NCCL SendRecv kernel: send and recv are not told apart).
Dtypes: `Float`, `float`, `c10::BFloat16`, `long int` ... become torch names (float32,
bfloat16, int64, ...), with their size in bytes.
"""

from __future__ import annotations

import re

from tracehouse.pipeline.common.comm_vocabulary import OP_NAME_PREFIXES

OPS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "send",
    "recv",
    "reduce",
    "gather",
    "scatter",
    "barrier",
    "send_recv",
)

_OP_ALIASES = {
    "allreduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "allgather": "all_gather",
    "allgather_base": "all_gather",
    "all_gather_base": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "all_gather_into_tensor_coalesced": "all_gather",
    "allgather_coalesced": "all_gather",
    "reducescatter": "reduce_scatter",
    "reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoall_base": "all_to_all",
    "all_to_all_single": "all_to_all",
    "all_to_allv": "all_to_all",
    "alltoallv": "all_to_all",
    "sendrecv": "send_recv",
    "recv_any_source": "recv",
    "monitored_barrier": "barrier",
}
# The network curve an op is timed with, where it is not the op's own name: a send or a recv is
# one side of a point-to-point pair, which network_curves files as send_recv (nccl-tests'
# sendrecv_perf, `tracehouse calibrate`'s sendrecv, a trace's matched send/recv pairs).
CURVE_OPS = {"send": "send_recv", "recv": "send_recv"}
_PREFIXES = re.compile("^(?:" + "|".join(map(re.escape, OP_NAME_PREFIXES)) + ")+")

# ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_AllGather_RING_LL, ncclDevKernel_SendRecv...
_KERNEL_OPS = (
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("reducescatter", "reduce_scatter"),
    ("alltoall", "all_to_all"),
    ("sendrecv", "send_recv"),
    ("broadcast", "broadcast"),
    ("reduce", "reduce"),
    ("send", "send"),
    ("recv", "recv"),
)

_DTYPES = {
    "float32": ("float", "float32", "c10::float", "single", "fp32"),
    "float64": ("double", "float64", "c10::double"),
    "float16": ("half", "float16", "c10::half", "fp16"),
    "bfloat16": ("bfloat16", "c10::bfloat16", "bf16"),
    "int64": ("long", "long int", "int64", "int64_t", "long long"),
    "int32": ("int", "int32", "int32_t"),
    "int16": ("short", "short int", "int16"),
    "int8": ("char", "signed char", "int8", "int8_t"),
    "uint8": ("byte", "unsigned char", "uint8", "uint8_t"),
    "bool": ("bool",),
    "float8_e4m3fn": ("float8_e4m3fn", "c10::float8_e4m3fn", "fp8"),
    "float8_e5m2": ("float8_e5m2", "c10::float8_e5m2"),
    "complex64": ("complexfloat", "c10::complex<float>", "complex64"),
    "complex128": ("complexdouble", "c10::complex<double>", "complex128"),
}
DTYPE_BYTES = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "complex64": 8,
    "complex128": 16,
}
_DTYPE_BY_SPELLING = {s: canon for canon, spellings in _DTYPES.items() for s in spellings}


def op_name(text: str | None) -> str | None:
    """The normalised op of a collective name, annotation or op name; None when not a known op."""
    if not text:
        return None
    key = _PREFIXES.sub("", text.strip().lower()).strip("_")
    key = _OP_ALIASES.get(key, key)
    return key if key in OPS else None


def kernel_op(name: str | None) -> str | None:
    """The op named inside an NCCL/RCCL kernel name (None for e.g. ncclDevKernel_Generic)."""
    if not name:
        return None
    base = name.split("(")[0].lower()
    for part in base.split("_")[1:]:
        for needle, op in _KERNEL_OPS:
            if part == needle:
                return op
    return None


def dtype_name(text: str | None) -> str | None:
    """A torch dtype name for any spelling; unknown spellings are kept lowercased."""
    if not text:
        return None
    key = text.strip().lower()
    return _DTYPE_BY_SPELLING.get(key, key)


def dtype_size(dtype: str) -> int | None:
    """Size in bytes of a normalised dtype (None when unknown)."""
    return DTYPE_BYTES.get(dtype)


def curve_op(op: str | None) -> str | None:
    """The op whose network curve times op (send and recv: send_recv)."""
    return CURVE_OPS.get(op, op) if op else op
