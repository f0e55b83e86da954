"""Per-rank entry under torchrun: `python -m tracehouse.collectors.calibrate.worker --spec S --result R`.

Measures like nccl-tests: per op and size, out-of-place then in-place, `warmup` untimed
iterations, then `iters` timed back to back (the device synchronized before and after); the
time is the per-iteration mean, and rank 0 keeps the slowest rank's. One more run from known
inputs is checked (#wrong, summed over ranks). Rank 0 writes the CalibrationResult and prints
one progress line per op, marked with PROGRESS_MARK for the launcher.

Every time is the transfer alone: the host time of a call that moves nothing (the smallest
all_reduce on a one-rank group: Python, c10d dispatch, the backend's call; `call_overhead_s`) is
taken out, since the replay already counts a traced call's host time apart from its transfer.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from tracehouse.collectors.calibrate import collectives
from tracehouse.collectors.calibrate.results import CalibrationResult, OpTable, Placement, RankInfo, SizeRow
from tracehouse.collectors.calibrate.spec import (
    DTYPE,
    DTYPE_BYTES,
    OPS,
    PROGRESS_MARK,
    CalibrationSpec,
    known_skip,
)
from tracehouse.collectors.run_manifest import cpu_name, device_facts
from tracehouse.collectors.train import init_distributed

# Calls timed for the per-call overhead (a call takes microseconds: many, for a steady mean).
OVERHEAD_ITERS = 100
# The least share of a measured time kept as transfer once the overhead is taken out.
MIN_TRANSFER_SHARE = 0.01


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (NCCL ops return once enqueued)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def this_rank(device: torch.device) -> RankInfo:
    """This rank as the `# Using devices` block lists it."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        bus = "{:04x}:{:02x}:{:02x}".format(
            getattr(props, "pci_domain_id", 0),
            getattr(props, "pci_bus_id", 0),
            getattr(props, "pci_device_id", 0),
        )
        index, name = device.index or 0, props.name
    else:
        bus, index, name = "cpu", int(os.environ.get("LOCAL_RANK", "0")), cpu_name()
    return RankInfo(
        rank=dist.get_rank(), pid=os.getpid(), host=socket.gethostname(), device=index, bus_id=bus, name=name
    )


def all_ranks(device: torch.device) -> tuple[RankInfo, ...]:
    """Every rank's RankInfo, in rank order (gathered, so each host is its own)."""
    gathered: list[RankInfo | None] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, this_rank(device))
    return tuple(info for info in gathered if info is not None)


def reduced(value: float, op: dist.ReduceOp, device: torch.device, dtype: torch.dtype) -> float:
    """A per-rank number reduced over the ranks."""
    tensor = torch.tensor([value], dtype=dtype, device=device)
    dist.all_reduce(tensor, op=op)
    return tensor.item()


def probe(op: str, spec: CalibrationSpec, device: torch.device) -> str | None:
    """Run the op once at the smallest size; the reason (same on every rank) when any rank cannot."""
    try:
        buffers = collectives.build(op, spec.min_bytes, False, device)
        collectives.run_once(op, buffers)
        synchronize(device)
        failure = ""
    except RuntimeError as exc:
        failure = " ".join(str(exc).split())[:300]
    failures: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(failures, failure)
    reasons = [f"rank {rank}: {text}" for rank, text in enumerate(failures) if text]
    return f"{spec.backend} cannot run it at world size {spec.world_size} ({reasons[0]})" if reasons else None


def call_overhead_s(spec: CalibrationSpec, device: torch.device) -> float:
    """Host seconds of one call that moves nothing: the smallest all_reduce on a one-rank group,
    timed like a placement over at least OVERHEAD_ITERS calls; the least over ranks (never more
    than any rank spends)."""
    solo, _ = dist.new_subgroups(group_size=1)
    _, _, count = OPS["all_reduce"].sized(spec.min_bytes, 1)
    buffer = torch.zeros(count, dtype=torch.float32, device=device)
    for _ in range(spec.warmup):
        dist.all_reduce(buffer, group=solo)
    synchronize(device)
    calls = max(spec.iters, OVERHEAD_ITERS)
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(buffer, group=solo)
    synchronize(device)
    return reduced((time.perf_counter() - start) / calls, dist.ReduceOp.MIN, device, torch.float64)


def transfer_time(measured_s: float, overhead_s: float) -> float:
    """The measured time less the per-call overhead; at least MIN_TRANSFER_SHARE of it (a time
    must stay positive; such a point is nearly all overhead)."""
    return max(measured_s - overhead_s, MIN_TRANSFER_SHARE * measured_s)


def measure(
    op: str, size_bytes: int, in_place: bool, spec: CalibrationSpec, device: torch.device, overhead_s: float
) -> Placement:
    """One placement of one size: timed, then validated once."""
    buffers = collectives.build(op, size_bytes, in_place, device)
    buffers.fill()
    for _ in range(spec.warmup):
        collectives.run_once(op, buffers)
    synchronize(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(spec.iters):
        collectives.run_once(op, buffers)
    synchronize(device)
    mean_s = (time.perf_counter() - start) / spec.iters
    slowest_s = reduced(mean_s, dist.ReduceOp.MAX, device, torch.float64)
    transfer_s = transfer_time(slowest_s, overhead_s)

    buffers.fill()
    collectives.run_once(op, buffers)
    synchronize(device)
    wrong = collectives.wrong_elements(buffers)
    if wrong is not None:
        wrong = int(reduced(wrong, dist.ReduceOp.SUM, device, torch.int64))

    n = spec.world_size
    send, recv, _ = OPS[op].sized(size_bytes, n)
    algbw = max(send, recv) * DTYPE_BYTES / 1.0e9 / transfer_s
    return Placement(
        time_us=transfer_s * 1.0e6,
        algbw_gbps=algbw,
        busbw_gbps=algbw * OPS[op].bus_factor(n),
        wrong=wrong,
        measured_time_us=slowest_s * 1.0e6,
    )


def measure_op(op: str, spec: CalibrationSpec, device: torch.device, overhead_s: float) -> OpTable:
    """Every size of one op."""
    rows = []
    for size in spec.sizes():
        send, recv, count = OPS[op].sized(size, spec.world_size)
        rows.append(
            SizeRow(
                size_bytes=max(send, recv) * DTYPE_BYTES,
                count=count,
                dtype=DTYPE,
                redop=OPS[op].redop,
                root=OPS[op].root,
                out_of_place=measure(op, size, False, spec, device, overhead_s),
                in_place=measure(op, size, True, spec, device, overhead_s),
            )
        )
    return OpTable(op=op, rows=tuple(rows))


def progress(line: str) -> None:
    """Tell the launcher (rank 0 only)."""
    if dist.get_rank() == 0:
        print(PROGRESS_MARK + line, flush=True)


def sweep(spec: CalibrationSpec, device: torch.device) -> CalibrationResult:
    """Every op of the spec; ops the backend cannot run are skipped with their reason."""
    ranks = all_ranks(device)
    overhead_s = call_overhead_s(spec, device)
    tables, skipped = [], {}
    for op in spec.ops:
        started = time.perf_counter()
        reason = known_skip(op, spec.backend, spec.world_size) or probe(op, spec, device)
        if reason:
            skipped[op] = reason
            progress(f"{OPS[op].program}: skipped: {reason}")
            continue
        table = measure_op(op, spec, device, overhead_s)
        tables.append(table)
        wrong = table.out_of_bounds
        progress(
            f"{OPS[op].program}: {len(table.rows)} sizes, {spec.min_bytes}..{spec.max_bytes} B, "
            f"avg busbw {table.avg_busbw_gbps:.3g} GB/s, "
            f"{f'WRONG results in {wrong} placement(s)' if wrong else 'no wrong results'} "
            f"({time.perf_counter() - started:.1f} s)"
        )
    facts = device_facts()
    return CalibrationResult(
        backend=spec.backend,
        torch_version=torch.__version__,
        nccl_version=facts["nccl_version"] if spec.backend == "nccl" else None,
        ranks=ranks,
        tables=tuple(tables),
        skipped=skipped,
        call_overhead_us=overhead_s * 1.0e6,
    )


def quiesce() -> None:
    """Let gloo's worker threads finish before teardown (see collectors.train.quiesce: a hang at exit)."""
    dist.barrier()
    time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    """Run this rank's share of the sweep; rank 0 writes the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, required=True, help="the CalibrationSpec (JSON)")
    parser.add_argument("--result", type=Path, required=True, help="where rank 0 writes the result (JSON)")
    args = parser.parse_args(argv)
    spec = CalibrationSpec.read(args.spec)
    device = init_distributed(spec.backend)
    result = sweep(spec, device)
    if dist.get_rank() == 0:
        result.write(args.result)
    quiesce()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
