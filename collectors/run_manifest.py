"""Fill the `RunManifest` of one scale point from its spec, the ranks' facts and the launch."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from tracehouse.collectors.model_sizes import flops_per_token, fsdp_unit_params, get_model_config, param_count
from tracehouse.collectors.spec import FACTS_NAME, RunSpec, trace_name
from tracehouse.pipeline.common.hardware import peak_flops, training_dtype
from tracehouse.pipeline.common.manifest import PowerCapture, RunManifest


def cpu_name() -> str:
    """The CPU model as /proc/cpuinfo names it (platform's guess elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def device_facts() -> dict[str, Any]:
    """Device type, name, training dtype and library versions as seen by this process."""
    import torch  # only the launcher and the ranks call this; keep the module importable without torch

    cuda = torch.cuda.is_available()
    device_type = ("rocm" if torch.version.hip else "cuda") if cuda else "cpu"
    facts: dict[str, Any] = {
        "device_type": device_type,
        "device_name": torch.cuda.get_device_name(0) if cuda else cpu_name(),
        "dtype": training_dtype(device_type, torch.cuda.get_device_capability(0) if cuda else None),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda if cuda else None,
        "nccl_version": None,
        "node_devices": torch.cuda.device_count() if cuda else node_cpus(),
    }
    if cuda and not torch.version.hip:
        facts["nccl_version"] = ".".join(str(part) for part in torch.cuda.nccl.version())
    return facts


def node_cpus() -> int:
    """The CPUs this process may run on: a gloo node's devices."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def git_commit() -> str | None:
    """The commit of the checkout the collectors run from, when it is a git checkout."""
    try:
        result = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None


def read_facts(run_dir: Path) -> dict[str, Any]:
    """What rank 0 recorded (train_facts.json), or {} when the run died before writing it."""
    try:
        return json.loads((Path(run_dir) / FACTS_NAME).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def fsdp_units(spec: RunSpec, cfg) -> dict[str, int]:
    """Parameters of each FSDP unit on one data-parallel rank before sharding (a tensor-parallel
    layout splits them over tp first): what a projection of a run on one device needs, since that
    run issues no all-gather or reduce-scatter."""
    if spec.strategy not in ("fsdp", "fsdp_tp"):
        return {}
    return {unit: params // (spec.tp or 1) for unit, params in fsdp_unit_params(cfg).items()}


def build_manifest(
    spec: RunSpec,
    run_dir: Path,
    *,
    power: PowerCapture,
    started_at: str,
    ended_at: str,
    command: list[str],
    failure: str | None,
) -> RunManifest:
    """The manifest of one scale point; status failed when failure is set or a trace is missing."""
    cfg = get_model_config(spec.model)
    facts = {**device_facts(), **read_facts(run_dir)}
    traces = {str(r): trace_name(r) for r in range(spec.world_size) if (run_dir / trace_name(r)).exists()}
    if failure is None and len(traces) != spec.world_size:
        failure = f"{len(traces)} of {spec.world_size} rank traces written; see {run_dir / 'train.log'}"
    return RunManifest(
        study=spec.study,
        run_id=spec.run_id,
        model=spec.model,
        model_config=cfg.as_dict(),
        n_params=param_count(cfg),
        fsdp_units=fsdp_units(spec, cfg),
        flops_per_token=flops_per_token(cfg, spec.seq_len),
        global_batch=spec.global_batch,
        seq_len=spec.seq_len,
        tokens_per_step=spec.tokens_per_step,
        strategy=spec.strategy,
        dp=spec.dp,
        tp=spec.tp,
        pp=spec.pp,
        world_size=spec.world_size,
        nodes=spec.nodes,
        devices_per_node=spec.world_size // spec.nodes,
        node_devices=facts["node_devices"],
        device_type=facts["device_type"],
        device_name=facts["device_name"],
        dtype=facts["dtype"],
        peak_flops=peak_flops(facts["device_name"], facts["dtype"]),
        torch_version=facts["torch_version"],
        nccl_version=facts["nccl_version"],
        cuda_version=facts["cuda_version"],
        hosts=facts.get("hosts", [platform.node()]),
        started_at=started_at,
        ended_at=ended_at,
        git_commit=git_commit(),
        command=command,
        traces=traces,
        power=power,
        status="failed" if failure else "ok",
        failure=failure,
    )
