"""Layouts as a user writes them: `dp=64`, `fsdp=64,tp=8`, `dp=8,tp=4,pp=4,microbatches=16`.

`dp=N` is N data-parallel replicas (DDP: each holds the whole model), `fsdp=N` N data-parallel
shards (FSDP); `tp` and `pp` are the tensor- and pipeline-parallel degrees (1 when left out),
`microbatches` the pipeline's micro-batches per step and `schedule` their order (`gpipe`, tracehouse
collect's, when left out, or `1f1b`). The world size is dp x tp x pp. The same text names a
projected point's layout (`projections.layout`) and a ranked candidate's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from tracehouse.pipeline.common.errors import TracehouseError

DEGREES = ("dp", "fsdp", "tp", "pp", "microbatches")
# A pipeline's schedules (torch.distributed.pipelining's ScheduleGPipe and Schedule1F1B); the first
# is tracehouse collect's, a layout's when it names none.
SCHEDULES = ("gpipe", "1f1b")
DEFAULT_SCHEDULE = SCHEDULES[0]
SCHEDULE_NAMES = {"gpipe": "GPipe", "1f1b": "1F1B"}


class Pipeline(NamedTuple):
    """A projected pipeline: its stages, micro-batches per step and schedule."""

    pp: int
    microbatches: int
    schedule: str = DEFAULT_SCHEDULE


def data_parallel_kind(strategy: str | None) -> str:
    """How a run's data-parallel ranks hold the model: "fsdp" (sharded) or "ddp" (replicated;
    also tp and pp runs, whose data-parallel replicas tracehouse collect wraps in DDP)."""
    return "fsdp" if (strategy or "").startswith("fsdp") else "ddp"


# A strategy's name with the other data-parallel kind (tracehouse collect's strategies; a pipeline
# run has no sharded counterpart it names).
OTHER_KIND = {"ddp": "fsdp", "fsdp": "ddp", "tp": "fsdp_tp", "fsdp_tp": "tp"}


# A strategy without tensor parallelism's name with it (tracehouse collect's).
WITH_TP = {"ddp": "tp", "fsdp": "fsdp_tp"}


def strategy_as(
    strategy: str | None, kind: str | None, tp: int | None = None, pp: int | None = None
) -> str | None:
    """The strategy a run of `strategy` becomes with data-parallel `kind` (None: unchanged) and,
    where `tp` or `pp` is given, tensor or pipeline parallelism of that degree added; None where
    no strategy names it (tracehouse collect's pipeline is DDP's, without tensor parallelism)."""
    if kind is not None and strategy is not None and kind != data_parallel_kind(strategy):
        strategy = OTHER_KIND.get(strategy)
    if pp is not None and pp > 1 and strategy is not None:
        return "pp" if strategy in ("ddp", "pp") and not (tp or 1) > 1 else None
    if tp is not None and tp > 1 and strategy is not None:
        return WITH_TP.get(strategy, strategy if strategy in WITH_TP.values() else None)
    return strategy


@dataclass(frozen=True)
class LayoutSpec:
    """One layout: the data-parallel kind and degree, tp, pp and the pipeline's micro-batches."""

    kind: str  # "ddp" or "fsdp"
    dp: int
    tp: int = 1
    pp: int = 1
    microbatches: int | None = None
    schedule: str | None = None  # None: tracehouse collect's (DEFAULT_SCHEDULE)

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp

    def text(self) -> str:
        """The layout as `parse_layout` reads it, e.g. "fsdp=64,tp=8"."""
        return layout_text(self.kind, self.dp, self.tp, self.pp, self.microbatches, self.schedule)


def layout_text(
    kind: str,
    dp: int,
    tp: int = 1,
    pp: int = 1,
    microbatches: int | None = None,
    schedule: str | None = None,
) -> str:
    """ "dp=N" (DDP) or "fsdp=N", then tp, pp and microbatches where they are not 1 / unset, and
    the schedule where it is not the default."""
    parts = [f"{'fsdp' if kind == 'fsdp' else 'dp'}={dp}"]
    parts += [f"{name}={n}" for name, n in (("tp", tp), ("pp", pp)) if n > 1]
    if microbatches is not None:
        parts.append(f"microbatches={microbatches}")
    if schedule not in (None, DEFAULT_SCHEDULE):
        parts.append(f"schedule={schedule}")
    return ",".join(parts)


def parse_layout(text: str) -> LayoutSpec:
    """A layout from `key=N` pairs joined by commas (module docstring); anything else is a
    TracehouseError that quotes the text and says what is wrong."""
    degrees: dict[str, int] = {}
    schedule = None
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        key = key.strip().lower()
        if key == "schedule" and sep:
            if schedule is not None:
                raise TracehouseError(f"layout {text!r}: schedule is given twice")
            schedule = value.strip().lower()
            if schedule not in SCHEDULES:
                raise TracehouseError(
                    f"layout {text!r}: schedule={value.strip()} is not one of {', '.join(SCHEDULES)}"
                )
            continue
        if not sep or key not in DEGREES:
            keys = [f"{k}=N" for k in DEGREES] + [f"schedule={'|'.join(SCHEDULES)}"]
            raise TracehouseError(f"layout {text!r}: {part.strip()!r} is not one of {', '.join(keys)}")
        if key in degrees:
            raise TracehouseError(f"layout {text!r}: {key} is given twice")
        try:
            n = int(value)
        except ValueError:
            raise TracehouseError(f"layout {text!r}: {key}={value.strip()} is not an integer") from None
        if n < 1:
            raise TracehouseError(f"layout {text!r}: {key} must be a positive integer")
        degrees[key] = n
    if ("dp" in degrees) == ("fsdp" in degrees):
        raise TracehouseError(
            f"layout {text!r}: give the data-parallel degree once, as dp=N (DDP replicas) or fsdp=N "
            "(FSDP shards)"
        )
    for given in [k for k in ("microbatches",) if k in degrees] + (["schedule"] if schedule else []):
        if degrees.get("pp", 1) == 1:
            raise TracehouseError(f"layout {text!r}: {given} needs pipeline parallelism (pp=N, N > 1)")
    kind = "fsdp" if "fsdp" in degrees else "ddp"
    return LayoutSpec(
        kind,
        degrees.get("fsdp", degrees.get("dp", 1)),
        degrees.get("tp", 1),
        degrees.get("pp", 1),
        degrees.get("microbatches"),
        None if schedule == DEFAULT_SCHEDULE else schedule,
    )


@dataclass(frozen=True)
class LayoutFamily:
    """Layouts one projection takes: world sizes of one data-parallel kind and one (tp, pp)."""

    world_sizes: list[int]
    kind: str
    model_parallel: tuple[int, int]  # (tp, pp)
    microbatches: int | None = None  # the pipeline's, where given
    schedule: str | None = None  # the pipeline's, where given

    def changes(self) -> dict:
        """The Scenario fields the layouts set: the data-parallel kind, and tp and pp (with its
        micro-batches and schedule) where above 1."""
        tp, pp = self.model_parallel
        return {
            "data_parallel": self.kind,
            "tensor_parallel": tp if tp > 1 else None,
            "pipeline_parallel": pp if pp > 1 else None,
            "microbatches": self.microbatches,
            "schedule": self.schedule,
        }


def layout_family(specs: list[LayoutSpec]) -> LayoutFamily:
    """The family of the given layouts; layouts that differ in more than their data-parallel
    degree are a TracehouseError."""
    if not specs:
        raise TracehouseError("no layout given")
    if len({(s.kind, s.tp, s.pp, s.microbatches, s.schedule) for s in specs}) > 1:
        raise TracehouseError(
            "the layouts of one projection differ only in their data-parallel degree: "
            f"{', '.join(s.text() for s in specs)} (project each family on its own)"
        )
    first = specs[0]
    return LayoutFamily(
        sorted({s.world_size for s in specs}),
        first.kind,
        (first.tp, first.pp),
        first.microbatches,
        first.schedule,
    )
