"""Named Llama-2 configurations and their analytic parameter counts and FLOPs per token.

Imports no torch: the manifest, the sweep validator and the report can use it anywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The shape of one Llama-2 model (names follow Meta's `ModelArgs`)."""

    name: str
    n_layers: int
    d_model: int  # hidden size ("dim")
    n_heads: int
    n_kv_heads: int  # < n_heads is grouped-query attention
    ffn_hidden: int  # SwiGLU inner size (already rounded as Llama-2 does)
    vocab_size: int
    max_seq_len: int
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(
                f"{self.name}: d_model {self.d_model} is not divisible by n_heads {self.n_heads}"
            )
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: n_heads {self.n_heads} is not divisible by n_kv_heads")
        if self.head_dim % 2:
            raise ValueError(f"{self.name}: rotary embeddings need an even head_dim, got {self.head_dim}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads

    def as_dict(self) -> dict[str, Any]:
        """The config as plain JSON-able values (for the run manifest)."""
        return dataclasses.asdict(self)


# The real Llama-2 shapes (Meta's params.json); tiny and small are ours, sized for CPU traces.
MODELS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(
        name="tiny",
        n_layers=2,
        d_model=128,
        n_heads=4,
        n_kv_heads=2,
        ffn_hidden=352,
        vocab_size=1024,
        max_seq_len=256,
    ),
    # Four layers, so pipelines of 3 and 4 stages can be collected on a CPU (tiny has 2).
    "small": ModelConfig(
        name="small",
        n_layers=4,
        d_model=256,
        n_heads=8,
        n_kv_heads=4,
        ffn_hidden=704,
        vocab_size=1024,
        max_seq_len=256,
    ),
    # 1.24 GB of fp32 weights in 24 small layers: bigger than a rank's whole resident memory
    # when it builds its half at world size 2, which proves no rank holds the full model.
    "medium": ModelConfig(
        name="medium",
        n_layers=24,
        d_model=1024,
        n_heads=8,
        n_kv_heads=8,
        ffn_hidden=2816,
        vocab_size=1024,
        max_seq_len=256,
    ),
    "7b": ModelConfig(
        name="7b",
        n_layers=32,
        d_model=4096,
        n_heads=32,
        n_kv_heads=32,
        ffn_hidden=11008,
        vocab_size=32000,
        max_seq_len=4096,
    ),
    "13b": ModelConfig(
        name="13b",
        n_layers=40,
        d_model=5120,
        n_heads=40,
        n_kv_heads=40,
        ffn_hidden=13824,
        vocab_size=32000,
        max_seq_len=4096,
    ),
    "70b": ModelConfig(
        name="70b",
        n_layers=80,
        d_model=8192,
        n_heads=64,
        n_kv_heads=8,
        ffn_hidden=28672,
        vocab_size=32000,
        max_seq_len=4096,
    ),
}


def get_model_config(name: str) -> ModelConfig:
    """The named configuration; ValueError listing the known names otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None


def param_count(cfg: ModelConfig) -> int:
    """Parameters of the model `collectors/llama.py` builds (untied embedding and output)."""
    d = cfg.d_model
    return cfg.n_layers * _block_params(cfg) + 2 * cfg.vocab_size * d + d  # + embedding, output, final norm


def fsdp_unit_params(cfg: ModelConfig) -> dict[str, int]:
    """Parameters of each FSDP unit `collectors/parallel.py` shards: every block (`layers.<i>`),
    and the root ("": embedding, final norm, output)."""
    blocks = {f"layers.{i}": _block_params(cfg) for i in range(cfg.n_layers)}
    return {**blocks, "": param_count(cfg) - sum(blocks.values())}


def stage_layers(n_layers: int, pp: int, stage: int) -> range:
    """The contiguous block indices pipeline stage `stage` owns (earlier stages take the remainder)."""
    base, extra = divmod(n_layers, pp)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (stage < extra))


def stage_params(cfg: ModelConfig, pp: int, stage: int) -> int:
    """Parameters of one pipeline stage as `collectors/parallel.py` cuts the model: its blocks, the
    embedding on the first stage, the final norm and the output on the last."""
    own = len(stage_layers(cfg.n_layers, pp, stage)) * _block_params(cfg)
    embedding = cfg.vocab_size * cfg.d_model
    return own + (embedding if stage == 0 else 0) + (embedding + cfg.d_model if stage == pp - 1 else 0)


def _block_params(cfg: ModelConfig) -> int:
    """One transformer block: wq, wo; wk, wv; w1, w2, w3; attention_norm, ffn_norm."""
    d, kv_width = cfg.d_model, cfg.n_kv_heads * cfg.head_dim
    return 2 * d * d + 2 * d * kv_width + 3 * d * cfg.ffn_hidden + 2 * d


def flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """Training FLOPs per token, PaLM convention: 6 N + 12 L d s."""
    return 6.0 * param_count(cfg) + 12.0 * cfg.n_layers * cfg.d_model * seq_len
