"""Give a model built on the meta device real storage on one device, and its initial weights.

torchtitan's order: build on `meta` (no memory), shard or parallelise, `to_empty` (each rank
allocates only its own part), then initialise. Every weight is drawn whole, one parameter at a
time, from a generator seeded by (seed, parameter name), and each rank keeps its slice of it:
every layout starts from the same weights, and no rank ever holds more of the model than its
own part plus one full parameter.
"""

from __future__ import annotations

import inspect
import zlib

import torch
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor
from tracehouse.collectors.llama import INIT_STD, Llama, rotary_tables

# distribute_tensor's src_data_rank (local slicing) is newer than the torch floor (2.6).
LOCAL_SLICING = "src_data_rank" in inspect.signature(distribute_tensor).parameters


def parameter_seed(seed: int, name: str) -> int:
    """The generator seed of one parameter: a pure function of the run's seed and the name."""
    return seed * 1_000_003 + zlib.crc32(name.encode())


def full_value(name: str, shape: torch.Size, device: torch.device, seed: int) -> torch.Tensor:
    """The whole initial value of a parameter: ones for norm scales, else Normal(0, INIT_STD)."""
    if name.endswith("norm.weight"):
        return torch.ones(shape, device=device)
    generator = torch.Generator(device=device).manual_seed(parameter_seed(seed, name))
    return torch.empty(shape, device=device).normal_(0.0, INIT_STD, generator=generator)


def local_part(full: torch.Tensor, param: torch.Tensor) -> torch.Tensor:
    """This rank's slice of full as param holds it (all of it for a plain tensor)."""
    if not isinstance(param, DTensor):
        return full
    if LOCAL_SLICING:  # src_data_rank=None: every rank slices its own copy, no communication
        return distribute_tensor(full, param.device_mesh, param.placements, src_data_rank=None).to_local()
    # Older torch scatters rank 0's copy: the same values, since every rank drew the same full tensor.
    return distribute_tensor(full, param.device_mesh, param.placements).to_local()


@torch.no_grad()
def init_weights(model: Llama, device: torch.device, seed: int) -> None:
    """Fill every parameter's local part and recompute the rotary tables."""
    for name, param in model.named_parameters():
        target = param.to_local() if isinstance(param, DTensor) else param
        target.copy_(local_part(full_value(name, param.shape, device, seed), param))
    cos, sin = rotary_tables(model.cfg.head_dim, model.cfg.max_seq_len, model.cfg.rope_theta)
    model.rope_cos.copy_(cos)
    model.rope_sin.copy_(sin)


def materialize(model: nn.Module, device: torch.device, seed: int) -> None:
    """Allocate the (sharded) meta model on device, then initialise it."""
    model.to_empty(device=device)
    init_weights(model, device, seed)
