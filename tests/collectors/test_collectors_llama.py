"""The reference model's pieces against independent formulations, on CPU, no process group."""

from __future__ import annotations

import copy

import torch
from tracehouse.collectors.llama import Llama, apply_rotary, rotary_tables, synthetic_batch
from tracehouse.collectors.model_sizes import MODELS, stage_layers
from tracehouse.collectors.parallel import cut_stage


def test_rotary_equals_metas_complex_product() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3, 8)
    cos, sin = rotary_tables(8, 16, 10000.0)
    # Meta's reference: view pairs as complex numbers and multiply by e^{i * angle}.
    freqs = torch.polar(torch.ones_like(cos[:5]), torch.atan2(sin[:5], cos[:5]))
    expected = torch.view_as_real(torch.view_as_complex(x.reshape(2, 5, 3, 4, 2)) * freqs[None, :, None, :])
    torch.testing.assert_close(apply_rotary(x, cos[:5], sin[:5]), expected.flatten(-2))


def test_pipeline_stages_compose_to_the_full_model() -> None:
    torch.manual_seed(0)
    full = Llama(MODELS["tiny"])
    inputs, _ = synthetic_batch(MODELS["tiny"], global_batch=2, seq_len=16, step=0, seed=0)
    first, last = cut_stage(copy.deepcopy(full), 0, 2), cut_stage(copy.deepcopy(full), 1, 2)
    assert list(first.layers) == ["0"] and list(last.layers) == ["1"]
    assert first.output is None and last.tok_embeddings is None
    torch.testing.assert_close(last(first(inputs)), full(inputs))


def test_stage_split_is_contiguous_and_complete() -> None:
    assert [list(stage_layers(5, 2, s)) for s in range(2)] == [[0, 1, 2], [3, 4]]
    assert [list(stage_layers(4, 4, s)) for s in range(4)] == [[0], [1], [2], [3]]


def test_synthetic_tokens_are_learnable_runs_fixed_by_seed_and_step() -> None:
    cfg = MODELS["tiny"]
    inputs, targets = synthetic_batch(cfg, global_batch=4, seq_len=10, step=3, seed=7)
    again, _ = synthetic_batch(cfg, global_batch=4, seq_len=10, step=3, seed=7)
    other, _ = synthetic_batch(cfg, global_batch=4, seq_len=10, step=4, seed=7)
    assert torch.equal(inputs, again) and not torch.equal(inputs, other)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])  # targets are the inputs shifted by one
    stride = (targets - inputs) % cfg.vocab_size
    assert (stride == stride[:, :1]).all()  # one constant stride per sequence
    assert inputs.shape == (4, 10) and int(inputs.max()) < cfg.vocab_size


def test_grouped_query_attention_shares_kv_heads() -> None:
    model = Llama(MODELS["tiny"])
    attention = model.layers["0"].attention
    assert attention.wk.out_features == MODELS["tiny"].n_kv_heads * MODELS["tiny"].head_dim
    assert attention.wq.out_features == MODELS["tiny"].n_heads * MODELS["tiny"].head_dim
    assert model(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, MODELS["tiny"].vocab_size)
