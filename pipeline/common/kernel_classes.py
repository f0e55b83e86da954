"""The kernel-class vocabulary: which device kernels are matmul / attention (tensor-core) work.

Defined here once (standard library only); the projection's `--matmul-speedup` reads it
(`pipeline/projection/gpu_rank.py`) and docs/projection.md lists the same patterns. Matched
case-insensitively anywhere in the kernel name. Real names per generation, as the profiler records them:

* NVIDIA Volta/Turing/Ampere cuBLAS: `volta_sgemm_64x64_nt`, `ampere_bf16_s16816gemm_...`,
  `sm80_xmma_gemm_...`; CUTLASS: `cutlass_80_tensorop_s1688gemm_...`;
* Hopper: `sm90_xmma_gemm_..._cublas`; Hopper/Blackwell cuBLAS(Lt) "nvjet" kernels:
  `nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN`, `nvjet_hsh_...` (no "gemm" in the name);
* AMD rocBLAS / hipBLASLt (Tensile): `Cijk_Ailk_Bljk_...`, `Cijk_Alik_Bljk_...`; CK `..._gemm_...`.

`cutlass_` (a CUTLASS kernel's own name), not `cutlass`: other kernels name CUTLASS types in
their template arguments (`finalizeKernelVecLoad<KernelParams<cutlass::bfloat16_t, ...>>`).
"""

from __future__ import annotations

import re

MATMUL_PATTERNS = (
    "gemm",
    "matmul",
    "mma",
    "nvjet",
    "cijk_",
    "cutlass_",
    "cublas",
    "attention",
    "attn",
    "flash",
    "fmha",
    "sdpa",
    "conv",
)
MATMUL_KERNEL = re.compile("|".join(re.escape(p) for p in MATMUL_PATTERNS), re.IGNORECASE)


def is_matmul_kernel(name: str | None) -> bool:
    """Whether a device kernel is matmul / attention work (what `--matmul-speedup` divides)."""
    return bool(name) and MATMUL_KERNEL.search(name) is not None
