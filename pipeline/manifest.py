"""The run manifest (`manifest.json` beside a run's traces): the single definition of a run's facts.

`collectors/` writes it; `pipeline/` reads it; the `runs` view exposes it. Users who captured
traces elsewhere can write a small one by hand: only `study` and `run_id` are required.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracehouse.pipeline.errors import ManifestError

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1


@dataclass(kw_only=True)
class PowerCapture:
    """How power was captured for a run, or why it was not."""

    source: str | None = None  # nvml | dcgmi | nvidia-smi; None when unavailable
    unavailable_reason: str | None = None  # set exactly when source is None
    files: list[str] = field(default_factory=list)  # power logs beside the manifest
    interval_ms: int | None = None


@dataclass(kw_only=True)
class RunManifest:
    """Everything known about one run (one scale point, one parallel layout)."""

    study: str
    run_id: str
    model: str | None = None  # named size, e.g. "tiny", "7b"
    model_config: dict[str, Any] = field(default_factory=dict)  # n_layers, d_model, ...
    n_params: int | None = None
    flops_per_token: float | None = None  # 6 N + 12 L d s (PaLM)
    global_batch: int | None = None  # sequences per step, all ranks together
    seq_len: int | None = None
    tokens_per_step: int | None = None  # global_batch * seq_len
    strategy: str | None = None  # ddp | fsdp | tp | pp | fsdp_tp
    dp: int | None = None  # parallel degrees; None when not stated (a hand-written manifest)
    tp: int | None = None
    pp: int | None = None
    world_size: int | None = None
    nodes: int | None = None  # None: the warehouse counts the traces' hosts
    devices_per_node: int | None = None
    device_type: str | None = None  # cuda | cpu | rocm
    device_name: str | None = None  # e.g. "NVIDIA H200"
    dtype: str | None = None  # bf16 | fp32 ...
    peak_flops: float | None = None  # per device, for dtype; None when unknown (CPU)
    torch_version: str | None = None
    nccl_version: str | None = None
    cuda_version: str | None = None
    hosts: list[str] = field(default_factory=list)
    started_at: str | None = None  # ISO-8601 UTC
    ended_at: str | None = None
    git_commit: str | None = None
    command: list[str] = field(default_factory=list)
    traces: dict[str, str] = field(default_factory=dict)  # rank (as text) -> file name
    power: PowerCapture = field(default_factory=PowerCapture)
    status: str = "ok"  # ok | failed
    failure: str | None = None  # one line, with the log file name, when status is failed
    manifest_version: int = MANIFEST_VERSION

    def __post_init__(self) -> None:
        if not self.study or not self.run_id:
            raise ValueError("a run manifest needs a non-empty study and run_id")
        degrees = (self.dp, self.tp, self.pp)
        if self.world_size is not None and any(d is not None for d in degrees):
            dp, tp, pp = (d or 1 for d in degrees)  # an unstated degree is 1
            if dp * tp * pp != self.world_size:
                raise ValueError(f"dp*tp*pp = {dp}*{tp}*{pp} does not equal world_size {self.world_size}")
        if self.tokens_per_step is None and self.global_batch and self.seq_len:
            self.tokens_per_step = self.global_batch * self.seq_len

    def to_json(self) -> str:
        """The manifest as indented JSON text."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=False) + "\n"

    def write(self, directory: Path) -> Path:
        """Write `manifest.json` into directory (atomically) and return its path."""
        target = Path(directory) / MANIFEST_NAME
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(self.to_json())
        tmp.replace(target)
        return target

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunManifest:
        """Build from parsed JSON, ignoring keys this version does not know."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        power = values.get("power")
        if isinstance(power, dict):
            pknown = {f.name for f in dataclasses.fields(PowerCapture)}
            values["power"] = PowerCapture(**{k: v for k, v in power.items() if k in pknown})
        return cls(**values)

    @classmethod
    def read(cls, path: Path) -> RunManifest:
        """Read a manifest file; raise ManifestError naming the file on any problem."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ManifestError(path, f"cannot read manifest: {exc}") from exc
        if not isinstance(data, dict):
            raise ManifestError(path, "manifest is not a JSON object")
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise ManifestError(path, str(exc)) from exc
