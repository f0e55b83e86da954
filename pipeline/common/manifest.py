"""The run manifest (`manifest.json` beside a run's traces): the single definition of a run's facts.

`collectors/` writes it; `pipeline/` reads it; the `runs` view exposes it. Users who captured
traces elsewhere can write a small one by hand: only `study` and `run_id` are required.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracehouse.pipeline.common.errors import ManifestError
from tracehouse.pipeline.common.limits import (
    INT64_MAX,
    INT64_MIN,
    MANIFEST_BOUNDS,
    MANIFEST_INT32_BOUND,
    MANIFEST_MAX_BYTES,
    MANIFEST_MAX_DEPTH,
)

MANIFEST_NAME = "manifest.json"
# A multi-node run's node N > 0 reports its PowerCapture here, beside the manifest.
NODE_POWER_TEMPLATE = "power.node{node}.json"
MANIFEST_VERSION = 1
REQUIRED = ("study", "run_id")
STATUSES = ("ok", "failed")
# Fields stored in INTEGER columns of run_manifests; every other integer is a BIGINT.
INT32_FIELDS = frozenset(
    {"dp", "tp", "pp", "world_size", "nodes", "devices_per_node", "node_devices", "manifest_version"}
)
RANK_KEY = re.compile(r"[0-9]{1,9}")  # a decimal rank that fits the INTEGER rank column
SHOWN_CHARS = 60
# The facts a user may state for a run without a manifest.json (`tracehouse ingest --tokens-per-step ...`).
STATED_FACTS = (
    "model",
    "model_config",
    "n_params",
    "fsdp_units",
    "flops_per_token",
    "global_batch",
    "seq_len",
    "tokens_per_step",
    "strategy",
    "dtype",
)


@dataclass(kw_only=True)
class PowerCapture:
    """How power was captured for a run, or why it was not."""

    source: str | None = None  # nvml | dcgmi | nvidia-smi; None when unavailable
    unavailable_reason: str | None = None  # set exactly when source is None
    files: list[str] = field(default_factory=list)  # power logs beside the manifest
    interval_ms: int | None = None
    # Set when capture started but is incomplete: sampling stopped mid-run (an NVML error), a
    # node's sampler reported nothing; one line per problem, "; "-joined. Ingest warns of it.
    failure: str | None = None

    def __post_init__(self) -> None:
        _check_fields(self, prefix="power.")


@dataclass(kw_only=True)
class RunManifest:
    """Everything known about one run (one scale point, one parallel layout)."""

    study: str
    run_id: str
    model: str | None = None  # named size, e.g. "tiny", "7b"
    model_config: dict[str, Any] = field(default_factory=dict)  # n_layers, d_model, ...
    n_params: int | None = None
    fsdp_units: dict[str, int] = field(default_factory=dict)  # FSDP unit ("" the root) -> parameters
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
    devices_per_node: int | None = None  # the devices each node ran ranks on (used, not capacity)
    # the devices each node has (GPUs; the CPUs for gloo on CPU, which ranks may oversubscribe);
    # None: not recorded (manifests before it)
    node_devices: int | None = None
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
        _check_fields(self)
        for name in REQUIRED:
            if not getattr(self, name):
                raise ValueError(f"{name} must be a non-empty string")
        if self.status not in STATUSES:
            raise ValueError(f"status must be 'ok' or 'failed', got {_shown(self.status)}")
        _check_traces(self.traces, self.world_size)
        degrees = (self.dp, self.tp, self.pp)
        if self.world_size is not None and any(d is not None for d in degrees):
            dp, tp, pp = (d or 1 for d in degrees)  # an unstated degree is 1
            if dp * tp * pp != self.world_size:
                raise ValueError(f"dp*tp*pp = {dp}*{tp}*{pp} does not equal world_size {self.world_size}")
        if self.tokens_per_step is None and self.global_batch and self.seq_len:
            tokens = self.global_batch * self.seq_len
            if problem := _number_problem("tokens_per_step", tokens):
                raise ValueError(f"tokens_per_step (global_batch * seq_len) {problem}")
            self.tokens_per_step = tokens

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
        """Build from parsed JSON; ValueError names a bad field.

        A key this version does not know is an error (a misspelt field would silently become
        NULL), except in a manifest of a newer `manifest_version`, whose new keys are ignored.
        """
        for name in REQUIRED:
            if name not in data:
                raise ValueError(f"{name} is required")
        newer = _is_newer(data.get("manifest_version", MANIFEST_VERSION))
        values = _known_fields(cls, data, "", strict=not newer)
        power = values.get("power")
        if isinstance(power, dict):
            values["power"] = PowerCapture(**_known_fields(PowerCapture, power, "power.", strict=not newer))
        return cls(**values)

    @classmethod
    def read(cls, path: Path) -> RunManifest:
        """Read a manifest file; raise ManifestError naming the file on any problem.

        Limits (`common.limits`): at most MANIFEST_MAX_BYTES, nested at most MANIFEST_MAX_DEPTH,
        numbers finite and integers within int64 anywhere, no key twice in an object.
        """
        try:
            with path.open("rb") as f:
                raw = f.read(MANIFEST_MAX_BYTES + 1)
            if len(raw) > MANIFEST_MAX_BYTES:
                raise ManifestError(path, f"manifest is larger than {MANIFEST_MAX_BYTES} bytes")
            data = parse_json(raw.decode("utf-8"))
        except RecursionError:
            raise ManifestError(path, _depth_message()) from None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ManifestError(path, f"cannot read manifest: {exc}") from exc
        if problem := _tree_problem(data):
            raise ManifestError(path, problem)
        if not isinstance(data, dict):
            raise ManifestError(path, "manifest is not a JSON object")
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise ManifestError(path, str(exc)) from exc


def parse_json(text: str) -> Any:
    """JSON text as Python values; ValueError for a key given twice, a number beyond double or int64."""
    return json.loads(
        text, object_pairs_hook=_unique_keys, parse_float=_finite, parse_int=_int64, parse_constant=_refused
    )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members; ValueError naming a key given twice (JSON would keep the last in silence)."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"key {_shown(key)} appears twice in one object")
        data[key] = value
    return data


def _finite(text: str) -> float:
    value = float(text)
    if value - value != 0:  # inf (1e400); NaN cannot be spelt as a JSON number
        raise ValueError(f"number {_shown(text)} is beyond double range")
    return value


def _int64(text: str) -> int:
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"integer {_shown(text)} is beyond int64")
    return value


def _refused(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number")


def _tree_problem(value: Any) -> str | None:
    """Why parsed JSON cannot be a manifest: nested too deep, or a string (or key) the warehouse cannot
    store (a lone surrogate is no UTF-8; a NUL ends a path); None when fine. Walked without recursing."""
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            if level > MANIFEST_MAX_DEPTH:
                return _depth_message()
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
        elif isinstance(item, str):
            if "\x00" in item:
                return f"the string {_shown(item)} holds a NUL character"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"the string {_shown(item)} is not valid Unicode (a lone surrogate)"
    return None


def _depth_message() -> str:
    return f"manifest nests arrays/objects deeper than {MANIFEST_MAX_DEPTH} levels"


def check_facts(facts: dict[str, Any]) -> None:
    """ValueError, starting with the field's name, unless the fields are valid run facts of a manifest."""
    RunManifest(study="-", run_id="-", **facts)


def _is_newer(version: object) -> bool:
    """True for a manifest_version above this tracehouse's (a wrong type is reported elsewhere)."""
    return type(version) is int and version > MANIFEST_VERSION


def _known_fields(kind: type, data: dict[str, Any], prefix: str, *, strict: bool) -> dict[str, Any]:
    """The items of `data` that are fields of `kind`; with `strict`, ValueError naming another key."""
    known = [f.name for f in dataclasses.fields(kind)]
    unknown = sorted(k for k in data if k not in known)
    if strict and unknown:
        close = difflib.get_close_matches(unknown[0][:SHOWN_CHARS], known, n=1)
        hint = (
            f"did you mean {prefix}{close[0]}?"
            if close
            else f"manifest_version {MANIFEST_VERSION} has no such field"
        )
        raise ValueError(f"unknown field {prefix}{unknown[0][:SHOWN_CHARS]} ({hint})")
    return {k: v for k, v in data.items() if k in known}


def _check_traces(traces: dict[str, str], world_size: int | None) -> None:
    """Raise ValueError unless every key is a rank (below world_size) and every value a file name."""
    for key, name in traces.items():
        if not RANK_KEY.fullmatch(key):
            raise ValueError(f"traces key {_shown(key)} is not a rank number")
        if name in ("", ".", "..") or "/" in name or "\\" in name:
            raise ValueError(
                f"traces[{key!r}] must be a file name beside {MANIFEST_NAME}, got {_shown(name)}"
            )
        if world_size is not None and int(key) >= world_size:
            raise ValueError(f"traces rank {int(key)} is not below world_size {world_size}")


def _check_fields(obj: Any, *, prefix: str = "") -> None:
    """Raise ValueError naming the first field of a dataclass whose value has the wrong type or range."""
    hints = _field_types(type(obj))
    for f in dataclasses.fields(obj):
        value, hint = getattr(obj, f.name), hints[f.name]
        if not _fits(value, hint):
            raise ValueError(f"{prefix}{f.name} must be {_describe(hint)}, got {_shown(value)}")
        problem = _number_problem(f.name, value)
        if problem:
            raise ValueError(f"{prefix}{f.name} {problem}")
        for key, unit in value.items() if f.name == "fsdp_units" else ():
            if problem := _number_problem(f.name, unit):
                raise ValueError(f"{prefix}{f.name}[{_shown(key)}] {problem}")


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    """The declared types of a dataclass's fields, resolved from their annotations."""
    return typing.get_type_hints(cls)


def _fits(value: Any, hint: Any) -> bool:
    """Whether a value (as parsed from JSON) has the declared type; a bool is not a number."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if isinstance(hint, types.UnionType):
        return any(_fits(value, h) for h in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            _fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items()
        )
    if isinstance(value, bool):
        return hint is bool
    if hint is float:
        return isinstance(value, (int, float))
    return isinstance(value, hint)


def _describe(hint: Any) -> str:
    """A declared type in the words of JSON: "an integer or null", "a list of strings"."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType):
        return " or ".join(_describe(h) for h in args)
    if typing.get_origin(hint) is list:
        return "a list of strings" if args[0] is str else "a list"
    if typing.get_origin(hint) is dict:
        return "an object of strings" if args[1] is str else "an object"
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false", type(None): "null"}
    return names.get(hint, "an object")


def _number_problem(name: str, value: Any) -> str | None:
    """Why a number cannot be stored for the field (not positive, too large), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not value > 0:
        return f"must be positive, got {_shown(value)}"
    limit = MANIFEST_INT32_BOUND if name in INT32_FIELDS else MANIFEST_BOUNDS.get(name, 2**63)
    if not value < limit:  # also inf and NaN, which no comparison passes
        return f"must be below {_bound(limit)}, got {_shown(value)}"
    return None


def _bound(limit: int | float) -> str:
    """A bound in full for an integer, as 1e+15 for a float."""
    return str(limit) if isinstance(limit, int) else f"{limit:g}"


def _shown(value: Any) -> str:
    """A value as Python writes it, shortened so that a message stays one short line."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."
