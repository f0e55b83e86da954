"""The six measured collectives over torch.distributed, with their buffers and their checks.

Each op builds the buffers of one size and placement, runs once per call, and counts the
wrong elements after a run from known inputs. Inputs are small integers in fp32
(`pattern`), so every sum is exact and a result is compared for equality, as nccl-tests does.
torch's all_reduce and broadcast are in-place only: both placements run the same in-place
call (measured separately); calibration.json says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from tracehouse.collectors.calibrate.spec import OPS

MODULUS = 1021  # a prime: the chunks of different ranks differ unless the ranks are 1021 apart


# torch 2.13 names them *_single and deprecates the older names, which older torch still needs.
ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def pattern(rank: int, start: int, count: int, device: torch.device) -> torch.Tensor:
    """The input rank `rank` holds at elements start..start+count of a buffer."""
    index = torch.arange(start, start + count, dtype=torch.int64, device=device)
    return ((index + 31 * rank) % MODULUS).to(torch.float32)


def summed(ranks: int, start: int, count: int, device: torch.device) -> torch.Tensor:
    """The sum over every rank's pattern (what a sum reduction yields)."""
    total = torch.zeros(count, dtype=torch.float32, device=device)
    for rank in range(ranks):
        total += pattern(rank, start, count, device)
    return total


@dataclass
class Buffers:
    """One size and placement of one op: what it sends from, receives into, and should receive."""

    send: torch.Tensor
    recv: torch.Tensor
    fill: Callable[[], None]  # write the known inputs
    expected: Callable[[], torch.Tensor | None]  # what recv should hold after one run; None: unchecked


def build(op: str, size_bytes: int, in_place: bool, device: torch.device) -> Buffers:
    """The buffers of one op at one size and placement on this rank."""
    rank, n = dist.get_rank(), dist.get_world_size()
    _, _, c = OPS[op].sized(size_bytes, n)  # the per-rank element count nccl-tests prints
    empty = torch.empty

    if op in ("all_reduce", "broadcast"):
        buf = empty(c, dtype=torch.float32, device=device)

        def fill() -> None:
            buf.copy_(pattern(rank, 0, c, device))

        def expected() -> torch.Tensor:
            return summed(n, 0, c, device) if op == "all_reduce" else pattern(0, 0, c, device)

        return Buffers(buf, buf, fill, expected)

    if op == "all_gather":
        recv = empty(c * n, dtype=torch.float32, device=device)
        send = recv[rank * c : (rank + 1) * c] if in_place else empty(c, dtype=torch.float32, device=device)

        def fill() -> None:
            recv.zero_()
            send.copy_(pattern(rank, 0, c, device))

        def expected() -> torch.Tensor:
            return torch.cat([pattern(r, 0, c, device) for r in range(n)])

        return Buffers(send, recv, fill, expected)

    if op == "reduce_scatter":
        send = empty(c * n, dtype=torch.float32, device=device)
        recv = send[rank * c : (rank + 1) * c] if in_place else empty(c, dtype=torch.float32, device=device)

        def fill() -> None:
            send.copy_(pattern(rank, 0, c * n, device))

        def expected() -> torch.Tensor:
            return summed(n, rank * c, c, device)

        return Buffers(send, recv, fill, expected)

    if op in ("alltoall", "sendrecv"):
        whole = c * n if op == "alltoall" else c
        send = empty(whole, dtype=torch.float32, device=device)
        recv = send if in_place else empty(whole, dtype=torch.float32, device=device)

        def fill() -> None:
            send.copy_(pattern(rank, 0, whole, device))

        def expected() -> torch.Tensor | None:
            if in_place:
                return None  # the aliased buffers are overwritten while sent, as in nccl-tests
            if op == "sendrecv":
                return pattern((rank - 1) % n, 0, c, device)
            return torch.cat([pattern(r, rank * c, c, device) for r in range(n)])

        return Buffers(send, recv, fill, expected)

    raise ValueError(f"unknown op {op!r}")


def run_once(op: str, buffers: Buffers) -> None:
    """Issue one instance of the op (on NCCL it may still be running on the stream)."""
    send, recv = buffers.send, buffers.recv
    if op == "all_reduce":
        dist.all_reduce(recv)
    elif op == "broadcast":
        dist.broadcast(recv, src=OPS[op].root)
    elif op == "all_gather":
        ALL_GATHER(recv, send)
    elif op == "reduce_scatter":
        REDUCE_SCATTER(recv, send)
    elif op == "alltoall":
        dist.all_to_all_single(recv, send)
    elif op == "sendrecv":
        # A ring: send to the next rank, receive from the previous one, as one group (nccl-tests'
        # ncclGroupStart/Send/Recv/GroupEnd; separate calls can deadlock NCCL on one stream).
        rank, n = dist.get_rank(), dist.get_world_size()
        pair = [dist.P2POp(dist.isend, send, (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
        for work in dist.batch_isend_irecv(pair):
            work.wait()
    else:
        raise ValueError(f"unknown op {op!r}")


def wrong_elements(buffers: Buffers) -> int | None:
    """Elements of recv that differ from what they should be; None when not checked."""
    want = buffers.expected()
    return None if want is None else int((buffers.recv != want).sum())
