"""Parameter counts and FLOPs per token of the named Llama-2 sizes, analytic against real modules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracehouse.collectors.model_sizes import (
    MODELS,
    ModelConfig,
    flops_per_token,
    get_model_config,
    param_count,
)

# Exact counts of Meta's released checkpoints (sum of tensor sizes in the consolidated weights).
KNOWN_PARAMS = {"7b": 6_738_415_616, "13b": 13_015_864_320, "70b": 68_976_648_192}


@pytest.mark.parametrize(("name", "params"), KNOWN_PARAMS.items())
def test_big_models_match_the_released_parameter_counts(name: str, params: int) -> None:
    assert param_count(get_model_config(name)) == params


def test_rounded_sizes_are_the_published_ones() -> None:
    assert round(param_count(MODELS["7b"]) / 1e9, 2) == 6.74
    assert round(param_count(MODELS["13b"]) / 1e9, 1) == 13.0
    assert round(param_count(MODELS["70b"]) / 1e9, 1) == 69.0


def test_flops_per_token_is_palm_formula_by_hand() -> None:
    # 7b at 4096 tokens: 6 * 6,738,415,616 + 12 * 32 * 4096 * 4096
    assert flops_per_token(MODELS["7b"], 4096) == 40_430_493_696 + 6_442_450_944
    # 70b at 2048: 6 * 68,976,648,192 + 12 * 80 * 8192 * 2048
    assert flops_per_token(MODELS["70b"], 2048) == 413_859_889_152 + 16_106_127_360


def test_tiny_analytic_count_equals_the_real_module() -> None:
    from tracehouse.collectors.llama import Llama

    model = Llama(MODELS["tiny"])
    assert param_count(MODELS["tiny"]) == sum(p.numel() for p in model.parameters()) == 631_424
    assert MODELS["tiny"].n_kv_heads < MODELS["tiny"].n_heads  # tiny exercises grouped-query attention


def test_small_has_layers_for_a_four_stage_pipeline_and_counts_as_its_module() -> None:
    from tracehouse.collectors.llama import Llama

    small = MODELS["small"]
    assert small.n_layers == 4 and small.n_kv_heads < small.n_heads
    assert param_count(small) == sum(p.numel() for p in Llama(small).parameters()) == 3_475_712
    assert flops_per_token(small, 64) == 6 * 3_475_712 + 12 * 4 * 256 * 64


@settings(max_examples=15, deadline=None)
@given(
    n_layers=st.integers(1, 3),
    heads=st.sampled_from([2, 4]),
    kv_div=st.sampled_from([1, 2]),
    head_dim=st.sampled_from([2, 8]),
    ffn=st.integers(1, 40),
    vocab=st.integers(2, 50),
)
def test_analytic_count_equals_module_for_any_shape(
    n_layers: int, heads: int, kv_div: int, head_dim: int, ffn: int, vocab: int
) -> None:
    from tracehouse.collectors.llama import Llama

    cfg = ModelConfig(
        name="h",
        n_layers=n_layers,
        d_model=heads * head_dim,
        n_heads=heads,
        n_kv_heads=heads // kv_div,
        ffn_hidden=ffn,
        vocab_size=vocab,
        max_seq_len=8,
    )
    assert param_count(cfg) == sum(p.numel() for p in Llama(cfg).parameters())


def test_bad_shapes_and_names_are_refused() -> None:
    with pytest.raises(ValueError, match="n_kv_heads"):
        ModelConfig(
            name="x",
            n_layers=1,
            d_model=12,
            n_heads=3,
            n_kv_heads=2,
            ffn_hidden=4,
            vocab_size=4,
            max_seq_len=4,
        )
    with pytest.raises(ValueError, match="known: tiny"):
        get_model_config("8b")
