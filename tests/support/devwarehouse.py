"""A fabricated development warehouse: tables named like the public views, plausible numbers.

Five scale points (1, 2, 4, 8, 16 devices) x two strategies (ddp, fsdp) of a strong-scaling
study. Numbers follow METHODOLOGY.md's definitions from a small step-time model, so the
report's charts can be checked against values computed here by hand.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

STUDY = "llama2-160m on H100, ddp vs fsdp"
WORLD_SIZES = (1, 2, 4, 8, 16)
STRATEGIES = ("ddp", "fsdp")
STEPS = (2, 3, 4)
TOKENS_PER_STEP = 64 * 1024
N_PARAMS = 160_000_000
FLOPS_PER_TOKEN = 6 * N_PARAMS + 12 * 12 * 768 * 1024
PEAK_FLOPS = 989.4e12
COMPUTE_US_1 = 158_000.0  # compute per step on one device
NO_POWER = "NVML library not found on this host (NVMLError_LibraryNotFound)"
T0 = 1_700_000_000_000_000_000  # epoch ns of the first window


@dataclass(kw_only=True)
class Names:
    """Strings that end up in the report; the safety test swaps in hostile ones."""

    study: str = STUDY
    host: str = "node-a"
    kernel: str = "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn"
    error_path: str = "/data/run-x/rank-3.pt.trace.json.gz"


def run_id(strategy: str, world: int) -> str:
    """The run id of one scale point."""
    return f"{strategy}-w{world}"


def step_parts(strategy: str, world: int) -> dict[str, float]:
    """compute / exposed comm / other / idle µs of one step (slowest rank)."""
    hops = math.log2(world) if world > 1 else 0.0
    inter_node = 1.0 if world > 8 else 0.0
    comm_scale = 1.6 if strategy == "fsdp" else 1.0
    return {
        "compute_us": COMPUTE_US_1 / world * (1.05 if strategy == "fsdp" else 1.0),
        "exposed_comm_us": comm_scale * (2_500.0 * hops + 9_000.0 * inter_node),
        "other_us": 1_200.0,
        "idle_us": 800.0 + 150.0 * world,
    }


def scale_point_row(strategy: str, world: int, power: bool) -> dict:
    """One row of `scale_points`, from the step model and METHODOLOGY.md's formulas."""
    parts = step_parts(strategy, world)
    step_us = sum(parts.values())
    base_us = sum(step_parts(strategy, 1).values())
    tps = TOKENS_PER_STEP / (step_us / 1e6)
    watts = 300.0 + 400.0 * parts["compute_us"] / step_us if power else None
    energy = watts * world * step_us / 1e6 if power else None
    return {
        "study": None,
        "run_id": run_id(strategy, world),
        "world_size": world,
        "step_time_us": step_us,
        "tokens_per_s": tps,
        "tokens_per_s_per_device": tps / world,
        "mfu": tps / world * FLOPS_PER_TOKEN / PEAK_FLOPS,
        "scaling_efficiency": (tps / (TOKENS_PER_STEP / (base_us / 1e6))) / world,
        "compute_frac": parts["compute_us"] / step_us,
        "exposed_comm_frac": parts["exposed_comm_us"] / step_us,
        "other_frac": parts["other_us"] / step_us,
        "idle_frac": parts["idle_us"] / step_us,
        "avg_power_w_per_device": watts,
        "energy_per_step_j": energy,
        "tokens_per_j": TOKENS_PER_STEP / energy if power else None,
        "energy_method": "counter" if power else None,
        "marginal_tokens_per_s_per_device": marginal(strategy, world),
        # each strategy here starts at one device: its own baseline
        "strategy_scaling_efficiency": (tps / (TOKENS_PER_STEP / (base_us / 1e6))) / world,
        "strategy_base_world_size": WORLD_SIZES[0],
    }


def throughput(strategy: str, world: int) -> float:
    """tokens/s of one scale point."""
    return TOKENS_PER_STEP / (sum(step_parts(strategy, world).values()) / 1e6)


def marginal(strategy: str, world: int) -> float | None:
    """Extra tokens/s per extra device against the next smaller scale point of the strategy."""
    if world == WORLD_SIZES[0]:
        return None
    previous = WORLD_SIZES[WORLD_SIZES.index(world) - 1]
    return (throughput(strategy, world) - throughput(strategy, previous)) / (world - previous)


def runs_rows(study: str, power: bool) -> list[dict]:
    """The `runs` view: one row per run."""
    return [
        {
            "study": study,
            "run_id": run_id(s, w),
            "model": "llama2-160m",
            "strategy": s,
            "world_size": w,
            "nodes": max(1, w // 8),
            "devices_per_node": min(w, 8),
            "dp": w,
            "tp": 1,
            "pp": 1,
            "device_type": "cuda",
            "device_name": "NVIDIA H100 80GB HBM3",
            "dtype": "bf16",
            "n_params": N_PARAMS,
            "tokens_per_step": TOKENS_PER_STEP,
            "flops_per_token": float(FLOPS_PER_TOKEN),
            "peak_flops": PEAK_FLOPS,
        }
        for s in STRATEGIES
        for w in WORLD_SIZES
    ]


def power_coverage_rows(study: str, power: bool) -> list[dict]:
    """The `power_coverage` view: every run with NVML counter power, or none and the manifest's reason."""
    return [
        {
            "study": study,
            "run_id": run_id(s, w),
            "has_power": power,
            "n_power_samples": 1 if power else 0,
            "source": "nvml" if power else None,
            "energy_method": "counter" if power else None,
            "unavailable_reason": None if power else NO_POWER,
        }
        for s in STRATEGIES
        for w in WORLD_SIZES
    ]


def step_rows(study: str) -> list[dict]:
    """The `step_breakdown` view: every rank and step, the last rank of each run a straggler."""
    rows = []
    for s in STRATEGIES:
        for w in WORLD_SIZES:
            parts = step_parts(s, w)
            for rank in range(w):
                for i, step in enumerate(STEPS):
                    idle = parts["idle_us"] * (0.5 if rank < w - 1 else 1.0) + 40.0 * i
                    window = parts["compute_us"] + parts["exposed_comm_us"] + parts["other_us"] + idle
                    rows.append(
                        {
                            "study": study,
                            "run_id": run_id(s, w),
                            "rank": rank,
                            "step": step,
                            "window_start_unix_ns": T0 + int(i * window * 1000),
                            "window_us": window,
                            "compute_us": parts["compute_us"],
                            "comm_us": parts["exposed_comm_us"] * 1.5,
                            "exposed_comm_us": parts["exposed_comm_us"],
                            "overlapped_comm_us": parts["exposed_comm_us"] * 0.5,
                            "other_us": parts["other_us"],
                            "idle_us": idle,
                        }
                    )
    return rows


def busbw(world: int, size: int) -> float:
    """Bus bandwidth GB/s of one message size: saturating, lower across nodes."""
    peak = 180.0 if world <= 8 else 40.0
    return peak * size / (size + 4 * 1024 * 1024)


def collective_rows(study: str) -> list[dict]:
    """The `collective_instances` view: two ranks' rows per instance, sizes 64 KiB to 256 MiB."""
    rows = []
    for s in STRATEGIES:
        ops = ("all_reduce",) if s == "ddp" else ("all_gather", "reduce_scatter")
        for w in WORLD_SIZES[1:]:
            for seq, size in enumerate(4**k * 65536 for k in range(7)):
                for op in ops:
                    bw = busbw(w, size)
                    for rank in (0, 1):
                        rows.append(
                            {
                                "study": study,
                                "run_id": run_id(s, w),
                                "rank": rank,
                                "process_group": "0",
                                "seq": seq,
                                "op": op,
                                "bytes": size,
                                "dtype": "BFloat16",
                                "group_size": w,
                                "start_unix_ns": T0 + seq * 1_000_000,
                                "dur_us": size / bw / 1e3,
                                "transfer_us": size / bw / 1e3,
                                "wait_us": 0.0,
                                "skew_us": 3.0,
                                "algbw_gbps": bw / 2,
                                "busbw_gbps": bw,
                            }
                        )
    return rows


def top_kernel_rows(study: str, kernel: str) -> list[dict]:
    """The `top_kernels` view: three kernels per run, each run once on each of its first two ranks."""
    rows = []
    for s in STRATEGIES:
        for w in WORLD_SIZES:
            ranks = min(w, 2)
            named = [  # (name, class, ns per call)
                (kernel, "compute", 700_000),
                ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "comm", 90_000 * w),
                ("vectorized_elementwise_kernel", "compute", 60_000),
            ]
            by_time = sorted(named, key=lambda n: (-n[2], n[0]))
            for place, (name, class_, dur_ns) in enumerate(by_time, start=1):
                rows.append(
                    {
                        "study": study,
                        "run_id": run_id(s, w),
                        "rule": "gpu",
                        "kind": "kernel",
                        "name": name,
                        "class": class_,
                        "calls": ranks,
                        "n_ranks": ranks,
                        "total_us": dur_ns * ranks / 1e3,
                        "us_per_rank": dur_ns / 1e3,
                        "time_rank": place,
                    }
                )
    return rows


def build(directory: Path, *, power: bool = True, names: Names | None = None) -> Path:
    """Write a development warehouse into directory and return it."""
    names = names or Names()
    directory.mkdir(parents=True, exist_ok=True)
    points = [scale_point_row(s, w, power) | {"study": names.study} for s in STRATEGIES for w in WORLD_SIZES]
    tables = {
        "runs": runs_rows(names.study, power),
        "power_coverage": power_coverage_rows(names.study, power),
        "scale_points": points,
        "step_breakdown": step_rows(names.study),
        "collective_instances": collective_rows(names.study),
        "top_kernels": top_kernel_rows(names.study, names.kernel),
        "power_samples": [
            {
                "run_id": run_id(s, w),
                "host": names.host,
                "device": 0,
                "ts_unix_ns": T0,
                "power_w": 500.0,
                "energy_counter_j": 1000.0,
                "source": "nvml",
            }
            for s in STRATEGIES
            for w in WORLD_SIZES
        ]
        if power
        else [],
        "traces": [
            {
                "study": names.study,
                "run_id": run_id(s, w),
                "rank": r,
                "path": f"{run_id(s, w)}/rank{r}.pt.trace.json.gz",
                "content_hash": hashlib.sha256(f"{s}{w}{r}".encode()).hexdigest(),
                "rank_source": "distributedInfo",
                "host": names.host,
                "size_bytes": 1_000_000 + r,
                "n_events": 5000,
            }
            for s in STRATEGIES
            for w in WORLD_SIZES
            for r in range(w)
        ],
        "ingest_errors": [
            {
                "path": names.error_path,
                "content_hash": "deadbeef",
                "reason": "truncated gzip stream",
                "at": "2026-01-01 00:00:00",
            }
        ],
    }
    con = duckdb.connect(str(directory / "tracehouse.duckdb"))
    for name, rows in tables.items():
        frame = pl.DataFrame(rows, infer_schema_length=None) if rows else power_schema()
        con.register("frame", frame.to_arrow())
        con.sql(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM frame")
        con.unregister("frame")
    con.close()
    return directory


def power_schema() -> pl.DataFrame:
    """An empty `power_samples` frame."""
    return pl.DataFrame(
        schema={
            "run_id": pl.String,
            "host": pl.String,
            "device": pl.Int32,
            "ts_unix_ns": pl.Int64,
            "power_w": pl.Float64,
            "energy_counter_j": pl.Float64,
            "source": pl.String,
        }
    )
