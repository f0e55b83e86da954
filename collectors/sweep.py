"""Sweeps: a TOML file of scale points, validated whole before anything runs, then run one by one.

study = "tiny-cpu"          # required
model = "tiny"              # required; a name from collectors/model_sizes.py
steps = 6                   # required
global_batch = 8            # required; fixed across world sizes (strong scaling)
seq_len = 64                # required
strategies = ["ddp", "fsdp"]  # with world_sizes: one group of points (or use [[points]])
world_sizes = [1, 2, 4]
# optional: tp, pp, microbatches, seed, lr, devices_per_node (cluster: nodes = ws / it)
[profile]                   # optional: wait, warmup, active, record_shapes, modules, profile_memory
[slurm]                     # optional (--emit slurm): cpus_per_task (default 8 per rank), exclusive (true),
                            # time_margin_s (600: the job's --time is the launcher's --timeout plus it)
[[points]]                  # optional, repeatable: strategies + world_sizes + any override above
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracehouse.collectors.slurm import SlurmConfig
from tracehouse.collectors.spec import ProfilingConfig, RunSpec
from tracehouse.pipeline.common.errors import InputFileError, TracehouseError
from tracehouse.pipeline.common.manifest import RunManifest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REQUIRED = ("study", "model", "steps", "global_batch", "seq_len")
INT_KEYS = ("steps", "global_batch", "seq_len", "tp", "pp", "microbatches", "seed", "devices_per_node")
POINT_KEYS = {*INT_KEYS, "model", "lr", "strategies", "world_sizes"}
TOP_KEYS = {*POINT_KEYS, "study", "profile", "points", "slurm"}


class SweepFileError(InputFileError):
    """A sweep file that is unreadable, incomplete or asks for an impossible layout."""


def _check_keys(path: Path, table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SweepFileError(
            path, f"unknown key {unknown[0]!r} in {where}; allowed: {', '.join(sorted(allowed))}"
        )
    for key in INT_KEYS:
        value = table.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise SweepFileError(path, f"{key} in {where} must be an integer, got {value!r}")


def _int_list(path: Path, value: Any, key: str, where: str) -> list:
    if not isinstance(value, list) or not value:
        raise SweepFileError(path, f"{key} in {where} must be a non-empty list")
    return value


def _group_specs(path: Path, base: dict[str, Any], group: dict[str, Any], where: str) -> list[RunSpec]:
    settings = {**base, **group}
    for key in ("strategies", "world_sizes"):
        if key not in settings:
            raise SweepFileError(path, f"missing required field {key!r} in {where}")
    specs = []
    for strategy in _int_list(path, settings["strategies"], "strategies", where):
        for world_size in _int_list(path, settings["world_sizes"], "world_sizes", where):
            specs.append(_one_spec(path, settings, strategy, world_size, where))
    return specs


def nodes_for(world_size: int, per_node: int | None) -> int:
    """The whole nodes of per_node devices that world_size ranks fill (one when it fits on one)."""
    if not per_node or world_size <= per_node:
        return 1
    if world_size % per_node:
        raise ValueError(
            f"world_size {world_size} does not fill whole nodes of devices_per_node {per_node}; "
            f"use a multiple of {per_node} (or at most {per_node})"
        )
    return world_size // per_node


def check_local_devices(specs: list[RunSpec], gpus: int) -> None:
    """A local sweep runs one rank per GPU when this machine has GPUs: each point must fit them."""
    if gpus == 0:
        return  # CPU ranks (gloo): as many as the sweep asks
    for spec in specs:
        if spec.world_size > gpus:
            raise TracehouseError(
                f"{spec.run_id}: world_size {spec.world_size} needs {spec.world_size} GPUs on this machine, "
                f"found {gpus}; use a smaller world size or --emit slurm"
            )


def _one_spec(path: Path, settings: dict[str, Any], strategy: Any, world_size: Any, where: str) -> RunSpec:
    per_node = settings.get("devices_per_node")
    fields = {
        k: settings[k]
        for k in (
            "study",
            "model",
            "steps",
            "global_batch",
            "seq_len",
            "tp",
            "pp",
            "microbatches",
            "seed",
            "lr",
        )
        if k in settings
    }
    try:
        nodes = nodes_for(world_size, per_node)
        return RunSpec(
            strategy=strategy, world_size=world_size, nodes=nodes, profile=settings["profile"], **fields
        )
    except (ValueError, TypeError) as exc:
        raise SweepFileError(path, f"{where}, {strategy} at world_size {world_size}: {exc}") from exc


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SweepFileError(path, f"cannot read sweep file: {exc}") from exc


def _slurm(path: Path, data: dict[str, Any]) -> SlurmConfig:
    table = data.get("slurm", {})
    if not isinstance(table, dict):
        raise SweepFileError(path, "[slurm] must be a table")
    _check_keys(path, table, {f.name for f in dataclasses.fields(SlurmConfig)}, "[slurm]")
    try:
        return SlurmConfig(**table)
    except (TypeError, ValueError) as exc:
        raise SweepFileError(path, f"[slurm]: {exc}") from exc


def load_slurm_config(path: Path) -> SlurmConfig:
    """The sweep file's `[slurm]` table (cpus_per_task, exclusive), defaults where absent."""
    path = Path(path)
    return _slurm(path, _read(path))


def load_sweep(path: Path) -> list[RunSpec]:
    """Every scale point of a sweep file, validated; SweepFileError (one line) on any problem."""
    path = Path(path)
    data = _read(path)
    _check_keys(path, data, TOP_KEYS, "the top level")
    _slurm(path, data)
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise SweepFileError(path, f"missing required field {missing[0]!r}")
    try:
        profile = ProfilingConfig(**data.get("profile", {}))
    except (TypeError, ValueError) as exc:
        raise SweepFileError(path, f"[profile]: {exc}") from exc
    base = {k: v for k, v in data.items() if k not in ("points", "slurm")} | {"profile": profile}
    groups = data.get("points") or [{}]
    specs = []
    for index, group in enumerate(groups):
        where = f"[[points]] #{index + 1}" if "points" in data else "the top level"
        _check_keys(path, group, POINT_KEYS, where)
        specs.extend(_group_specs(path, base, group, where))
    seen: set[str] = set()
    for spec in specs:
        if spec.run_id in seen:
            raise SweepFileError(path, f"scale point {spec.run_id} appears twice")
        seen.add(spec.run_id)
    return specs


def run_sweep(
    specs: list[RunSpec], out_dir: Path, *, timeout_s: float, echo: Callable[[str], None] = print
) -> list[RunManifest]:
    """Run each scale point in turn; a failed point is recorded and the sweep goes on."""
    import torch  # only a local run looks at the machine
    from tracehouse.collectors.launch import run_point  # imports power samplers; only when running

    manifests = []
    for spec in specs:
        if spec.nodes > 1:
            raise SweepFileError(out_dir, f"{spec.run_id} spans {spec.nodes} nodes; use --emit slurm")
    check_local_devices(specs, torch.cuda.device_count())
    for index, spec in enumerate(specs, 1):
        echo(f"[{index}/{len(specs)}] {spec.study}/{spec.run_id}: torchrun, {spec.world_size} rank(s)")
        manifest = run_point(spec, out_dir, timeout_s=timeout_s)
        echo(f"    {manifest.status}" + (f": {manifest.failure}" if manifest.failure else ""))
        manifests.append(manifest)
    return manifests
