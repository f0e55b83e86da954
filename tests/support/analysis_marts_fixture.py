"""A small hand-made study (two scale points, collectives, power) with every figure worked out."""

from __future__ import annotations

from support.analysis_rawdb import US, ev, kernel, raw_db, step


def study_db():
    """Runs r1 (1 rank) and r2 (2 ranks on hosts hA, hB) of study s; see the tests for the sums."""
    r2 = dict(study="s", run_id="r2")
    r1 = dict(study="s", run_id="r1")
    steps = [
        step(1, 0, 100, rank=0, **r2),
        step(2, 100, 100, rank=0, **r2),
        step(1, 0, 100, rank=1, **r2),
        step(2, 100, 100, rank=1, **r2),
        step(1, 0, 100, rank=0, **r1),
        step(2, 300, 100, rank=0, **r1),
    ]
    events = [
        kernel("gemm", 10, 50, launch_us=10, rank=0, **r2),
        kernel("gemm", 110, 40, launch_us=110, rank=0, **r2),
        kernel("gemm", 10, 80, launch_us=10, rank=1, **r2),
        kernel("gemm", 110, 30, launch_us=110, rank=1, **r2),
        kernel("gemm", 10, 140, launch_us=10, rank=0, **r1),
        # a CPU run of another study: main thread (1, 1), one step
        ev("user_annotation", "ProfilerStep#1", 0, 100, study="c", run_id="cpu"),
        ev("cpu_op", "aten::mm", 10, 50, study="c", run_id="cpu"),
        ev("cpu_op", "gloo:all_reduce", 40, 40, tid="9", study="c", run_id="cpu"),
    ]
    steps.append(step(1, 0, 100, study="c", run_id="cpu"))
    coll = dict(op="all_reduce", dtype="float32", source="nccl_kernel", **r2)
    collectives = [
        {
            **coll,
            "process_group": "0",
            "seq": 0,
            "bytes": 10**6,
            "group_size": 2,
            "rank": 0,
            "ts_unix_ns": 100_000,
            "dur_ns": 50_000,
        },
        {
            **coll,
            "process_group": "0",
            "seq": 0,
            "bytes": 10**6,
            "group_size": 2,
            "rank": 1,
            "ts_unix_ns": 125_000,
            "dur_ns": 30_000,
        },
        {
            **coll,
            "process_group": "1",
            "seq": None,
            "bytes": 8,
            "group_size": 2,
            "rank": 0,
            "ts_unix_ns": 1_000,
            "dur_ns": 1_000,
        },
        {
            **coll,
            "process_group": "1",
            "seq": None,
            "bytes": 8,
            "group_size": 2,
            "rank": 0,
            "ts_unix_ns": 3_000,
            "dur_ns": 1_000,
        },
        {
            **coll,
            "process_group": "1",
            "seq": None,
            "bytes": 8,
            "group_size": 2,
            "rank": 1,
            "ts_unix_ns": 2_000,
            "dur_ns": 1_000,
        },
    ]
    traces = [
        {"rank": 0, "host": "hA", **r2},
        {"rank": 1, "host": "hB", **r2},
        {"rank": 0, "host": "hA", **r1},
        {"rank": 0, "host": "c0", "study": "c", "run_id": "cpu"},
    ]
    facts = dict(tokens_per_step=700, flops_per_token=1e6, peak_flops=1e12, model="tiny", strategy="ddp")
    manifests = [{**facts, "world_size": 2, "dp": 2, **r2}, {**facts, "world_size": 1, **r1}]
    power = [
        {
            "host": "hA",
            "device": 0,
            "ts_unix_ns": 0,
            "power_w": 100.0,
            "energy_counter_j": 0.0,
            "source": "nvml",
            **r2,
        },
        {
            "host": "hA",
            "device": 0,
            "ts_unix_ns": 200 * US,
            "power_w": 100.0,
            "energy_counter_j": 0.02,
            "source": "nvml",
            **r2,
        },
        {"host": "hA", "device": 0, "ts_unix_ns": 0, "power_w": 50.0, "source": "nvidia-smi", **r1},
        {"host": "hA", "device": 0, "ts_unix_ns": 500 * US, "power_w": 150.0, "source": "nvidia-smi", **r1},
    ]
    # rank 0 of r2 allocates on GPU 0 (rank 1 has no memory events): (µs, change, allocated, reserved)
    levels = [
        (5, 100, 100, 200),
        (50, 300, 400, 512),
        (90, -300, 100, 512),
        (150, 50, 150, 512),
        (250, -150, 0, 512),
    ]
    gpu0 = dict(device_type=1, device=0, rank=0, **r2)
    memory = [
        {"ts_unix_ns": t * US, "bytes": b, "total_allocated": a, "total_reserved": r, **gpu0}
        for t, b, a, r in levels
    ]
    return raw_db(
        steps=steps,
        events=events,
        collectives=collectives,
        traces=traces,
        manifests=manifests,
        power=power,
        memory=memory,
    )
