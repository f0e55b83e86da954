"""One scale point of the reference workload, fully resolved and validated (no torch here).

The sweep file and the `collect` flags both become RunSpecs; the launcher writes the spec
beside the traces (`run_spec.json`) and every rank reads it back from there.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracehouse.collectors.model_sizes import get_model_config

STRATEGIES = ("ddp", "fsdp", "tp", "pp", "fsdp_tp")
SPEC_NAME = "run_spec.json"
# The one definition of a rank trace's file name.
TRACE_TEMPLATE = "rank{rank}.pt.trace.json.gz"
LOSS_NAME = "loss.jsonl"
FACTS_NAME = "train_facts.json"
LOG_NAME = "train.log"
# Seconds one scale point (its torchrun) may run before it is stopped and marked failed.
DEFAULT_TIMEOUT_S = 3600


def trace_name(rank: int) -> str:
    """The trace file name of one rank."""
    return TRACE_TEMPLATE.format(rank=rank)


@dataclass(frozen=True, kw_only=True)
class ProfilingConfig:
    """The profiler schedule: skip `wait` steps, warm up, record `active` steps, once."""

    wait: int = 1  # the first step pays one-off costs (allocations, lazy init)
    warmup: int = 1
    active: int = 3
    # Input shapes give gloo spans their message sizes; costs ~150 MB RSS per active step.
    record_shapes: bool = True
    # nn.Module and python_function events (the layer above each op): torch's with_modules, and
    # with_stack, since eager models get module events only from the Python tracer.
    modules: bool = True
    # [memory] instant events (every allocation and free): large traces, so only when asked.
    profile_memory: bool = False

    def __post_init__(self) -> None:
        if self.wait < 0 or self.warmup < 0 or self.active < 1:
            raise ValueError(f"profiler schedule needs wait, warmup >= 0 and active >= 1, got {self}")

    @property
    def steps_needed(self) -> int:
        """Training steps that must run for the trace to be written."""
        return self.wait + self.warmup + self.active

    def active_steps(self) -> list[int]:
        """The step numbers (`ProfilerStep#N`) the trace will hold."""
        first = self.wait + self.warmup
        return list(range(first, first + self.active))


def degrees(strategy: str, world_size: int, tp: int | None, pp: int | None) -> tuple[int, int, int]:
    """(dp, tp, pp) for a strategy at a world size; ValueError when they do not fit."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    implied = {"ddp": (1, 1), "fsdp": (1, 1), "tp": (world_size, 1), "pp": (1, world_size)}
    want_tp, want_pp = implied.get(strategy, (tp or 2, 1))
    for name, given, want in (("tp", tp, want_tp), ("pp", pp, want_pp)):
        if given is not None and given != want:
            raise ValueError(
                f"strategy {strategy} at world_size {world_size} needs {name}={want}, got {given}"
            )
    if world_size % (want_tp * want_pp):
        raise ValueError(f"world_size {world_size} is not divisible by tp*pp = {want_tp}*{want_pp}")
    return world_size // (want_tp * want_pp), want_tp, want_pp


def default_microbatches(per_replica_batch: int, pp: int) -> int:
    """Microbatches per step when none are given: 2 per stage (a GPipe bubble of (pp - 1) / (3pp - 1)
    of the step), raised to the smallest count that divides the per-replica batch; the batch itself
    (one sequence each) where no count from 2 x pp up does. pp = 3 with a batch of 8: 8."""
    wanted = 2 * pp
    fits = [n for n in range(wanted, per_replica_batch + 1) if per_replica_batch % n == 0]
    return fits[0] if fits else max(per_replica_batch, 1)


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """Everything one torchrun launch of the reference workload needs."""

    study: str
    model: str
    strategy: str  # one of STRATEGIES
    world_size: int
    steps: int
    global_batch: int  # sequences per step, all ranks together (fixed across a strong-scaling sweep)
    seq_len: int
    tp: int | None = None  # None: implied by the strategy (fsdp_tp defaults to 2)
    pp: int | None = None
    microbatches: int | None = None  # pipeline only; None: default_microbatches
    nodes: int = 1
    seed: int = 0
    lr: float = 1e-3
    profile: ProfilingConfig = field(default_factory=ProfilingConfig)

    def __post_init__(self) -> None:
        dp, tp, pp = degrees(self.strategy, self.world_size, self.tp, self.pp)
        object.__setattr__(self, "tp", tp)
        object.__setattr__(self, "pp", pp)
        if self.strategy == "pp" and self.microbatches is None:  # pp = 1 too: one stage, GPipe
            object.__setattr__(self, "microbatches", default_microbatches(self.global_batch // dp, pp))
        self._check_sizes(dp)

    def _check_sizes(self, dp: int) -> None:
        cfg = get_model_config(self.model)
        if self.global_batch % dp:
            raise ValueError(f"global_batch {self.global_batch} is not divisible by dp {dp}")
        if self.strategy == "pp" and (self.global_batch // dp) % self.microbatches:
            raise ValueError(
                f"per-replica batch {self.global_batch // dp} is not divisible by "
                f"{self.microbatches} microbatches"
            )
        if self.seq_len > cfg.max_seq_len:
            raise ValueError(f"seq_len {self.seq_len} exceeds {self.model}'s max_seq_len {cfg.max_seq_len}")
        if cfg.n_kv_heads % self.tp:
            raise ValueError(f"tp {self.tp} does not divide {self.model}'s {cfg.n_kv_heads} key/value heads")
        if self.pp > cfg.n_layers:
            raise ValueError(f"pp {self.pp} exceeds {self.model}'s {cfg.n_layers} layers")
        if self.steps < self.profile.steps_needed:
            raise ValueError(
                f"steps {self.steps} is fewer than the profiler schedule needs ({self.profile.steps_needed})"
            )
        if self.world_size % self.nodes:
            raise ValueError(f"world_size {self.world_size} is not divisible by nodes {self.nodes}")

    @property
    def dp(self) -> int:
        """Data-parallel degree."""
        return self.world_size // (self.tp * self.pp)

    @property
    def run_id(self) -> str:
        """The run's name inside its study, e.g. `ddp-ws2`, `fsdp_tp-ws4-tp2`."""
        extra = f"-tp{self.tp}" if self.strategy == "fsdp_tp" else ""
        nodes = f"-n{self.nodes}" if self.nodes > 1 else ""
        return f"{self.strategy}-ws{self.world_size}{extra}{nodes}"

    @property
    def tokens_per_step(self) -> int:
        """Tokens in one global step."""
        return self.global_batch * self.seq_len

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-able values."""
        return dataclasses.asdict(self)

    def write(self, run_dir: Path) -> Path:
        """Write run_spec.json into run_dir."""
        path = Path(run_dir) / SPEC_NAME
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        """Inverse of to_dict."""
        values = dict(data)
        values["profile"] = ProfilingConfig(**values.get("profile", {}))
        return cls(**values)

    @classmethod
    def read(cls, path: Path) -> RunSpec:
        """Read a run_spec.json."""
        return cls.from_dict(json.loads(Path(path).read_text()))
