"""Per-rank entry point under torchrun: `python -m tracehouse.collectors.train --spec RUN_DIR/run_spec.json`.

Trains the reference Llama model for spec.steps on synthetic tokens under the spec's
parallel layout, profiled; writes this rank's trace, and on rank 0 the per-step loss
(`loss.jsonl`) and the facts the manifest needs (`train_facts.json`), all beside the spec.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import resource
import signal
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.distributed as dist
from tracehouse.collectors.llama import Llama, synthetic_batch
from tracehouse.collectors.model_sizes import get_model_config
from tracehouse.collectors.parallel import Replica, build_mesh, build_replica
from tracehouse.collectors.profiling import profiling
from tracehouse.collectors.run_manifest import device_facts
from tracehouse.collectors.spec import FACTS_NAME, LOSS_NAME, RunSpec


def now_iso() -> str:
    """The current UTC time, ISO-8601."""
    return datetime.now(timezone.utc).isoformat()


def init_distributed(backend: str | None = None) -> torch.device:
    """Join the process group (`backend`, else NCCL on GPUs and gloo on CPU); this rank's device."""
    if (backend or ("nccl" if torch.cuda.is_available() else "gloo")) == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        return device
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo")
    return torch.device("cpu")


def local_batch(spec: RunSpec, step: int, dp_rank: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """This data-parallel replica's rows of the step's global batch."""
    inputs, targets = synthetic_batch(
        get_model_config(spec.model),
        global_batch=spec.global_batch,
        seq_len=spec.seq_len,
        step=step,
        seed=spec.seed,
    )
    rows = slice(dp_rank * spec.global_batch // spec.dp, (dp_rank + 1) * spec.global_batch // spec.dp)
    return inputs[rows].to(device), targets[rows].to(device)


def train(spec: RunSpec, replica: Replica, run_dir: Path, device: torch.device) -> list[torch.Tensor | None]:
    """Run every step under the profiler; return this rank's loss per step (None: no loss here)."""
    optimizer = torch.optim.AdamW(replica.parameters(), lr=spec.lr, weight_decay=0.1)
    losses = []
    with profiling(spec.profile, run_dir, dist.get_rank()) as prof:
        for step in range(spec.steps):
            inputs, targets = local_batch(spec, step, replica.dp_rank, device)
            losses.append(replica.forward_backward(inputs, targets))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            prof.step()
    return losses


def max_rss_bytes() -> int:
    """This process's peak resident set size so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def build_and_train(
    spec: RunSpec, run_dir: Path, device: torch.device
) -> tuple[list[torch.Tensor | None], int]:
    """Build this rank's replica and train it (the model is freed on return); the losses and the
    peak RSS once the replica was built. The model is built on the meta device: no rank ever holds
    all of it (`materialize`)."""
    with torch.device("meta"):
        model = Llama(get_model_config(spec.model))
    replica = build_replica(model, spec, build_mesh(spec, device.type), device)
    built_rss = max_rss_bytes()
    return train(spec, replica, run_dir, device), built_rss


def quiesce() -> None:
    """Let every rank finish its gloo work before the process group is torn down.

    Tearing down a gloo group joins its worker threads while holding the GIL; a worker still
    releasing a finished collective's Python tensor needs the GIL too, and the rank hangs at
    exit (seen here, about 1 run in 5). A barrier, then a moment without the GIL, avoids it.
    """
    dist.barrier()
    time.sleep(0.2)


def global_losses(losses: list[torch.Tensor | None], device: torch.device) -> list[float]:
    """Mean over the ranks that hold a loss, per step (one all-reduce, after profiling)."""
    owned = all(loss is not None for loss in losses)
    values = [float(loss) if owned else 0.0 for loss in losses] + [1.0 if owned else 0.0]
    total = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(total)
    return (total[:-1] / total[-1]).tolist()


def write_rank0_outputs(run_dir: Path, losses: list[float], started_at: str, built_rss: int) -> None:
    """loss.jsonl and train_facts.json (hosts and build RSS come from every rank)."""
    ranks: list[tuple[str, int]] = [("", 0)] * dist.get_world_size()
    dist.all_gather_object(ranks, (socket.gethostname(), built_rss))
    hosts = [host for host, _ in ranks]
    if dist.get_rank() != 0:
        return
    lines = [json.dumps({"step": step, "loss": loss}) for step, loss in enumerate(losses)]
    (run_dir / LOSS_NAME).write_text("\n".join(lines) + "\n")
    facts = {
        **device_facts(),
        "hosts": sorted(set(hosts)),
        # Per rank: peak resident bytes once its part of the model was built, before step 0.
        "build_max_rss_bytes": [rss for _, rss in ranks],
        "train_started_at": started_at,
        "train_ended_at": now_iso(),
    }
    (run_dir / FACTS_NAME).write_text(json.dumps(facts, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run this rank's share of one scale point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, required=True, help="run_spec.json in the run directory")
    spec_path = parser.parse_args(argv).spec
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` prints every thread's stack to train.log
    spec, run_dir = RunSpec.read(spec_path), spec_path.parent
    device = init_distributed()
    started_at = now_iso()
    rank_losses, built_rss = build_and_train(spec, run_dir, device)
    write_rank0_outputs(run_dir, global_losses(rank_losses, device), started_at, built_rss)
    quiesce()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
