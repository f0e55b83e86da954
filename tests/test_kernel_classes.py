"""The kernel-class vocabulary: real kernel names of each GPU generation, as profilers recorded them."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracehouse.pipeline.common.kernel_classes import MATMUL_PATTERNS, is_matmul_kernel

REPO = Path(__file__).resolve().parents[1]

# Copied from real traces (/work/shared/data/traces, named per line) and NVIDIA's cuBLAS names.
MATMUL = [
    "volta_sgemm_64x64_nt",  # hta/rank-0...pt.trace.json.gz (V100)
    "volta_gcgemm_32x32_nt",  # kineto/resnet50_autograd_api_2021
    "ampere_sgemm_128x64_nn",  # hta/event_sync_multi_stream (A100)
    "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn",
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
    "warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",  # hta/alexnet_cuda_sync
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>"
    "(cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4::Params)",  # hta/nccl_parser_config_rank0
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_"
    "kernel__5x_cublas",  # tracelens/h100_bert_small (H100)
    "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT",  # tracelens/b200_vllm_eager_rank0_of8 (B200)
    "nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN",  # same trace
    "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN",  # cuBLAS on H100
    "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_TNT",  # cuBLAS on H100, half precision
    "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1",  # hta/mi250_minitoy (MI250)
    "Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1",  # hipBLASLt (MI300)
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4>>",
]
NOT_MATMUL = [
    # tracelens/b200_vllm_eager_rank0_of8: names CUTLASS types in its template arguments only
    "void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<cutlass::bfloat16_t, "
    "cutlass::bfloat16_t, 4, true> >(moe::dev::finalize::KernelParams<cutlass::bfloat16_t>)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
    "Memcpy HtoD (Pageable -> Device)",
    "",
    None,
]


@pytest.mark.parametrize("name", MATMUL)
def test_matmul_kernels_of_every_generation(name: str) -> None:
    assert is_matmul_kernel(name)


@pytest.mark.parametrize("name", NOT_MATMUL)
def test_other_kernels_are_not_matmul(name: str | None) -> None:
    assert not is_matmul_kernel(name)


def test_one_home_the_projection_and_the_docs_use_it() -> None:
    source = (REPO / "pipeline/projection/gpu_rank.py").read_text()
    assert "from tracehouse.pipeline.common.kernel_classes import is_matmul_kernel" in source
    assert 're.compile(r"gemm' not in source
    docs = (REPO / "docs/projection.md").read_text()
    assert all(pattern in docs for pattern in MATMUL_PATTERNS)
