"""Parallel layouts of the Llama model: DDP, FSDP2, tensor parallel, pipeline, FSDP x TP.

`build_replica` turns the model, built on the meta device, into this rank's part (cut, sharded,
parallelised while still on meta), gives only that part storage and its initial weights
(`materialize`), and returns a `Replica`: a train step (forward + backward) and the parameters
to optimise.
The same code runs on CPU with gloo and on CUDA with NCCL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
from torch.distributed.tensor import Replicate
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel
from tracehouse.collectors.llama import Llama, cross_entropy
from tracehouse.collectors.materialize import materialize
from tracehouse.collectors.model_sizes import stage_layers
from tracehouse.collectors.spec import RunSpec
from tracehouse.pipeline.common.hardware import training_dtype

# Megatron-style splits inside one block: column-parallel in, row-parallel out.
BLOCK_TP_PLAN = {
    "attention.wq": ColwiseParallel(),
    "attention.wk": ColwiseParallel(),
    "attention.wv": ColwiseParallel(),
    "attention.wo": RowwiseParallel(),
    "feed_forward.w1": ColwiseParallel(),
    "feed_forward.w3": ColwiseParallel(),
    "feed_forward.w2": RowwiseParallel(),
}


@dataclass(kw_only=True)
class Replica:
    """This rank's share of the model and how to run one step's forward and backward on it."""

    parameters: Callable[[], Iterable[nn.Parameter]]
    # (inputs, targets) of this rank's data shard -> the loss, or None where this rank has none
    forward_backward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor | None]
    dp_rank: int  # which slice of the global batch this rank feeds


def build_mesh(spec: RunSpec, device_type: str) -> DeviceMesh:
    """The device mesh of the layout: 1-D for single strategies, (dp, tp) for fsdp_tp."""
    if spec.strategy == "fsdp_tp":
        return init_device_mesh(device_type, (spec.dp, spec.tp), mesh_dim_names=("dp", "tp"))
    name = {"ddp": "dp", "fsdp": "dp", "tp": "tp", "pp": "pp"}[spec.strategy]
    return init_device_mesh(device_type, (spec.world_size,), mesh_dim_names=(name,))


def plain_step(module: nn.Module, autocast: torch.autocast) -> Callable:
    """forward + backward of a module that maps tokens to logits."""

    def forward_backward(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        with autocast:
            loss = cross_entropy(module(inputs), targets)
        loss.backward()
        return loss.detach()

    return forward_backward


def apply_tp(model: Llama, tp_mesh: DeviceMesh) -> None:
    """Shard attention and MLP Megatron-style; vocab-parallel embedding and output."""
    parallelize_module(
        model,
        tp_mesh,
        {
            "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
            "output": ColwiseParallel(output_layouts=Replicate()),
        },
    )
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, BLOCK_TP_PLAN)


def apply_fsdp(model: Llama, dp_mesh: DeviceMesh, policy: MixedPrecisionPolicy) -> None:
    """FSDP2: shard each block, then the root (embedding, final norm, output)."""
    for block in model.layers.values():
        fully_shard(block, mesh=dp_mesh, mp_policy=policy)
    fully_shard(model, mesh=dp_mesh, mp_policy=policy)


def cut_stage(model: Llama, stage: int, pp: int) -> Llama:
    """Keep only what pipeline stage `stage` runs."""
    keep = {str(i) for i in stage_layers(model.cfg.n_layers, pp, stage)}
    for name in [n for n in model.layers if n not in keep]:
        del model.layers[name]
    if stage > 0:
        model.tok_embeddings = None
    if stage < pp - 1:
        model.norm = None
        model.output = None
    return model


def pipeline_replica(
    model: Llama, spec: RunSpec, mesh: DeviceMesh, device: torch.device, autocast: torch.autocast
) -> Replica:
    """GPipe over the pp mesh: the first stage feeds tokens, only the last returns a loss."""
    stage_index, pp = mesh.get_local_rank(), spec.pp
    module = cut_stage(model, stage_index, pp)
    materialize(module, device, spec.seed)  # only this stage's layers get memory
    stage = PipelineStage(module, stage_index, pp, device, group=mesh.get_group())
    schedule = ScheduleGPipe(stage, n_microbatches=spec.microbatches, loss_fn=cross_entropy)

    first, last = stage_index == 0, stage_index == pp - 1

    def forward_backward(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
        # Each stage calls step with its own arguments: the first feeds tokens, the last (the
        # same stage when pp = 1) holds targets and gets the microbatches' losses; a middle
        # stage passes nothing and has no loss.
        losses: list[torch.Tensor] = []
        with autocast:
            schedule.step(
                *([inputs] if first else []), **({"target": targets, "losses": losses} if last else {})
            )
        return torch.stack([loss.detach() for loss in losses]).mean() if last else None

    return Replica(parameters=module.parameters, forward_backward=forward_backward, dp_rank=0)


AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def compute_dtype(device: torch.device) -> torch.dtype | None:
    """The device's training dtype (`hardware.training_dtype`, the manifest's dtype too); None on
    CPU, which trains in fp32."""
    if device.type != "cuda":
        return None
    device_type = "rocm" if torch.version.hip else "cuda"
    return AUTOCAST_DTYPES[training_dtype(device_type, torch.cuda.get_device_capability(device))]


def device_autocast(device: torch.device) -> torch.autocast:
    """Autocast to the device's compute dtype; off on CPU (fp32)."""
    dtype = compute_dtype(device)
    return torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None)


def fsdp_policy(device: torch.device) -> MixedPrecisionPolicy:
    """FSDP2's precision: on GPU parameters are all-gathered and used in the compute dtype and
    gradients reduce-scattered in fp32 (torchtitan's default; without a policy FSDP2 moves fp32);
    on CPU everything stays fp32."""
    dtype = compute_dtype(device)
    if dtype is None:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)


def build_replica(model: Llama, spec: RunSpec, mesh: DeviceMesh, device: torch.device) -> Replica:
    """Parallelise the model (built on the meta device) for spec.strategy on mesh, then give this
    rank's part memory on device and its initial weights."""
    autocast = device_autocast(device)
    if spec.strategy == "pp":
        return pipeline_replica(model, spec, mesh, device, autocast)
    dp_rank = 0
    if spec.strategy == "fsdp":
        apply_fsdp(model, mesh, fsdp_policy(device))
        dp_rank = mesh.get_local_rank()
    elif spec.strategy == "tp":
        apply_tp(model, mesh)
    elif spec.strategy == "fsdp_tp":
        apply_tp(model, mesh["tp"])
        apply_fsdp(model, mesh["dp"], fsdp_policy(device))
        dp_rank = mesh["dp"].get_local_rank()
    materialize(model, device, spec.seed)
    module: nn.Module = model
    if spec.strategy == "ddp" and spec.world_size > 1:
        # One replica has nothing to all-reduce: world size 1 is the plain single-device baseline.
        # The only buffers are the constant rotary tables: broadcasting them each step is waste.
        module = DistributedDataParallel(model, broadcast_buffers=False)
        # A Python comm hook puts DDP's all-reduce through torch.distributed, where it is labelled.
        module.register_comm_hook(state=None, hook=default_hooks.allreduce_hook)
        dp_rank = mesh.get_local_rank()
    return Replica(
        parameters=module.parameters, forward_backward=plain_step(module, autocast), dp_rank=dp_rank
    )
