"""The profiler as a context manager: `with profiling(cfg, out_dir, rank) as prof: ... prof.step()`.

One gzipped Kineto trace per rank, named by `spec.TRACE_TEMPLATE`, holding `ProfilerStep#N` for the
active steps of the schedule (`spec.ProfilingConfig`), with input shapes, nn.Module events and, when
asked, `[memory]` events; every collective inside is labelled (`comm_labels`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity
from tracehouse.collectors.comm_labels import label_collectives
from tracehouse.collectors.spec import ProfilingConfig, trace_name

__all__ = ["ProfilingConfig", "profiling", "trace_name"]


@contextmanager
def profiling(cfg: ProfilingConfig, out_dir: Path, rank: int) -> Iterator[torch.profiler.profile]:
    """Profile the block on this rank; the trace lands in out_dir as trace_name(rank)."""
    target = Path(out_dir) / trace_name(rank)

    def write_trace(prof: torch.profiler.profile) -> None:
        # A .gz suffix makes torch gzip the JSON as it writes.
        prof.export_chrome_trace(str(target))

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    schedule = torch.profiler.schedule(wait=cfg.wait, warmup=cfg.warmup, active=cfg.active, repeat=1)
    with (
        label_collectives(),
        torch.profiler.profile(
            activities=activities,
            schedule=schedule,
            on_trace_ready=write_trace,
            record_shapes=cfg.record_shapes,
            with_modules=cfg.modules,
            with_stack=cfg.modules,
            profile_memory=cfg.profile_memory,
        ) as prof,
    ):
        yield prof
