"""Name every collective in the trace: op, bytes, dtype and process group, as a labelled span.

gloo traces carry no `record_param_comms`, so while `label_collectives()` is active each
collective entry point of `torch.distributed` (used by DDP's comm hook, FSDP2, pipelining)
and of `torch.distributed._functional_collectives` (used by DTensor / tensor parallel) runs
inside a `record_function` span named by `tracehouse.pipeline.common.comm_label.format_label`.
Only the outermost call is labelled (deprecated aliases call their replacements). The span
covers the call: issue only for async ops, issue and wait for blocking ones.
"""

from __future__ import annotations

import inspect
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed import distributed_c10d as c10d
from tracehouse.pipeline.common.comm_label import format_label
from tracehouse.pipeline.common.comm_names import OPS


@dataclass(frozen=True)
class Target:
    """How to label one collective function."""

    op: str
    message_arg: str | None  # the argument holding the message tensor(s); None: no payload
    # The message argument is one rank's share (an all-gather input): bytes x group size.
    times_group: bool = False

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"{self.op!r} is not a normalised collective op (comm_names.OPS)")


# bytes follows the nccl-tests "size": the larger buffer (all-gather output, reduce-scatter input).
C10D_TARGETS: dict[str, Target] = {
    "all_reduce": Target("all_reduce", "tensor"),
    "all_reduce_coalesced": Target("all_reduce", "tensors"),
    "all_gather": Target("all_gather", "tensor_list"),
    "all_gather_single": Target("all_gather", "output_tensor"),
    "all_gather_into_tensor": Target("all_gather", "output_tensor"),
    "_all_gather_base": Target("all_gather", "output_tensor"),
    "all_gather_coalesced": Target("all_gather", "output_tensor_lists"),
    "reduce_scatter": Target("reduce_scatter", "input_list"),
    "reduce_scatter_single": Target("reduce_scatter", "input"),
    "reduce_scatter_tensor": Target("reduce_scatter", "input"),
    "_reduce_scatter_base": Target("reduce_scatter", "input"),
    "all_to_all_single": Target("all_to_all", "input"),
    "all_to_all": Target("all_to_all", "input_tensor_list"),
    "broadcast": Target("broadcast", "tensor"),
    "reduce": Target("reduce", "tensor"),
    "send": Target("send", "tensor"),
    "isend": Target("send", "tensor"),
    "recv": Target("recv", "tensor"),
    "irecv": Target("recv", "tensor"),
    "barrier": Target("barrier", None),
}
FUNCOL_TARGETS: dict[str, Target] = {
    "all_reduce": Target("all_reduce", "self"),
    "all_reduce_coalesced": Target("all_reduce", "self"),
    "all_gather_single": Target("all_gather", "self", times_group=True),
    "all_gather_single_autograd": Target("all_gather", "self", times_group=True),
    "all_gather_tensor": Target("all_gather", "self", times_group=True),
    "all_gather_tensor_autograd": Target("all_gather", "self", times_group=True),
    "all_gather_single_coalesced": Target("all_gather", "self", times_group=True),
    "all_gather_into_tensor_coalesced": Target("all_gather", "self", times_group=True),
    "reduce_scatter_single": Target("reduce_scatter", "self"),
    "reduce_scatter_single_autograd": Target("reduce_scatter", "self"),
    "reduce_scatter_tensor": Target("reduce_scatter", "self"),
    "reduce_scatter_tensor_autograd": Target("reduce_scatter", "self"),
    "reduce_scatter_single_coalesced": Target("reduce_scatter", "self"),
    "reduce_scatter_tensor_coalesced": Target("reduce_scatter", "self"),
    "all_to_all_single": Target("all_to_all", "self"),
    "all_to_all_single_autograd": Target("all_to_all", "self"),
    "broadcast": Target("broadcast", "self"),
}


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors in a tensor or (nested) list of tensors."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_in(item)]
    return []


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.float32` -> `float32`."""
    return str(dtype).removeprefix("torch.")


class CollectiveLabeler:
    """Counts collectives per process group on this rank and makes their labels."""

    def __init__(self) -> None:
        self.seq: dict[str, int] = defaultdict(int)
        self._depth = threading.local()

    def label(self, target: Target, group: dist.ProcessGroup, message: Any) -> str:
        """The label of the next collective on group (advances that group's seq)."""
        pg = str(group.group_name)
        seq = self.seq[pg]
        self.seq[pg] = seq + 1
        tensors = tensors_in(message)
        size = sum(t.numel() * t.element_size() for t in tensors)
        if target.times_group:
            size *= group.size()
        return format_label(
            op=target.op,
            pg=pg,
            pg_desc=str(getattr(group, "group_desc", "") or "none"),
            seq=seq,
            bytes=size,
            dtype=dtype_name(tensors[0].dtype) if tensors else "none",
            group_size=group.size(),
        )

    def wrap(
        self, fn: Callable, target: Target, resolve: Callable[[Any, str], dist.ProcessGroup]
    ) -> Callable:
        """fn, running inside a labelled record_function span when it is the outermost collective."""
        signature = inspect.signature(fn)

        def labelled(*args: Any, **kwargs: Any) -> Any:
            if getattr(self._depth, "value", 0):
                return fn(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            group = resolve(bound.arguments.get("group"), bound.arguments.get("tag", ""))
            message = bound.arguments.get(target.message_arg) if target.message_arg else None
            self._depth.value = 1
            try:
                with torch.profiler.record_function(self.label(target, group, message)):
                    return fn(*args, **kwargs)
            finally:
                self._depth.value = 0

        labelled.__wrapped__ = fn  # type: ignore[attr-defined]
        labelled.__name__ = fn.__name__
        return labelled


def c10d_group(group: Any, _tag: str = "") -> dist.ProcessGroup:
    """A c10d `group=` argument as a ProcessGroup (None is the default group)."""
    return group if group is not None else c10d._get_default_group()


def funcol_group(group: Any, tag: str = "") -> dist.ProcessGroup:
    """A functional-collective group (mesh, (mesh, dim), name, ranks, pg) as a ProcessGroup."""
    return c10d._resolve_process_group(funcol._resolve_group_name(group, tag or ""))


def _patch_plan(labeler: CollectiveLabeler) -> list[tuple[Any, str, Callable, Callable]]:
    """(module, attribute, original, replacement) for every function this torch version has."""
    plan = []
    for name, target in C10D_TARGETS.items():
        original = getattr(c10d, name, None)
        if original is None:
            continue
        wrapped = labeler.wrap(original, target, c10d_group)
        plan.append((c10d, name, original, wrapped))
        # torch.distributed re-exports these; patch it too (callers use `dist.X`).
        if getattr(dist, name, None) is original:
            plan.append((dist, name, original, wrapped))
    for name, target in FUNCOL_TARGETS.items():
        original = getattr(funcol, name, None)
        if original is not None:
            plan.append((funcol, name, original, labeler.wrap(original, target, funcol_group)))
    return plan


def _batch_wrapper(original: Callable, swaps: dict[Callable, Callable]) -> Callable:
    """batch_isend_irecv that first points each P2POp at the labelled isend/irecv."""

    def batch_isend_irecv(p2p_op_list: list[dist.P2POp]) -> list[dist.Work]:
        for p2p in p2p_op_list:
            p2p.op = swaps.get(p2p.op, p2p.op)
        return original(p2p_op_list)

    return batch_isend_irecv


@contextmanager
def label_collectives() -> Iterator[CollectiveLabeler]:
    """Within this block every collective torch.distributed issues is a labelled span."""
    labeler = CollectiveLabeler()
    plan = _patch_plan(labeler)
    swaps = {orig: new for module, _, orig, new in plan if module is c10d}
    batch = c10d.batch_isend_irecv
    plan.append((c10d, "batch_isend_irecv", batch, _batch_wrapper(batch, swaps)))
    if dist.batch_isend_irecv is batch:
        plan.append((dist, "batch_isend_irecv", batch, plan[-1][3]))
    for module, name, _, replacement in plan:
        setattr(module, name, replacement)
    try:
        yield labeler
    finally:
        for module, name, original, _ in reversed(plan):
            setattr(module, name, original)
