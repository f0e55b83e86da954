"""The runs of a folder without a manifest: which of its traces belong together, and each run's name.

As users have them, folders mix traces of several jobs. The rules, applied per folder:

* A trace without `distributedInfo` comes from a process that never initialised
  torch.distributed, and one with `world_size` 1 is a world of one: either is a run of its own,
  named after the file (rank 0 unless distributedInfo says otherwise).
* Where the user states a rank (`--rank`) for a trace of the folder, the folder's other traces
  are one run with it, as before: a rank claimed twice there is an error, not a split.
* Otherwise the traces group by `world_size`. A group in which two traces claim one rank is not
  one run: it splits by file-name pattern (the name with its digits masked: `rank0_of8` and
  `rank1_of8` stay together), and traces that still clash become runs of their own.
* A run that is its folder's only group is named after the folder; otherwise after its names'
  common beginning (`pair_sampled_rank-0`, `pair_sampled_rank-1`: `pair_sampled`), or the
  first file's name when they have none.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tracehouse.pipeline.discovery.header import TraceHeader

_DIGITS = re.compile(r"[0-9]+")
_TRACE_SUFFIXES = (".gz", ".json", ".pt.trace")
_RANK_TAIL = re.compile(r"[-_.]*(rank)?[-_.]*$", re.IGNORECASE)
MIN_PREFIX_CHARS = 3


@dataclass(frozen=True, kw_only=True)
class RunGroup:
    """Traces of one folder that form one run, and the run's name."""

    run_id: str
    traces: tuple[Path, ...]
    single_process: bool = False  # one trace of a process without a distributed world: rank 0
    named_after_folder: bool = False  # the folder's only group: its name is the folder's


def file_run_name(path: Path) -> str:
    """A trace's name without its suffixes: `resnet50_v100_2021.pt.trace.json.gz` -> `resnet50_v100_2021`."""
    name = path.name
    for suffix in _TRACE_SUFFIXES:
        name = name.removesuffix(suffix)
    return name or path.name


def group_folder(
    directory: Path, traces: list[Path], headers: Mapping[Path, TraceHeader], stated: Mapping[Path, int]
) -> list[RunGroup]:
    """Split a folder's traces into runs (see the module's rules), in a stable order."""
    alone = [p for p in traces if p not in stated and headers[p].single_process]
    others = [p for p in traces if p not in alone]
    members = [others] if stated else _by_world_size(others, headers)
    groups = [RunGroup(run_id=file_run_name(p), traces=(p,), single_process=True) for p in alone]
    if len(members) == 1:
        return [*groups, RunGroup(run_id=directory.name, traces=tuple(members[0]), named_after_folder=True)]
    return groups + [RunGroup(run_id=_group_name(paths), traces=tuple(paths)) for paths in members]


def _by_world_size(paths: list[Path], headers: Mapping[Path, TraceHeader]) -> list[list[Path]]:
    """Traces grouped by world size (unknown last), each group split where two claim one rank."""
    by_size: dict[int | None, list[Path]] = {}
    for p in paths:
        by_size.setdefault(headers[p].world_size, []).append(p)
    groups: list[list[Path]] = []
    for _, same in sorted(by_size.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        groups.extend(_without_clashes(same, {p: headers[p].rank for p in same}))
    return groups


def _without_clashes(paths: list[Path], ranks: Mapping[Path, int | None]) -> list[list[Path]]:
    """The traces as groups in which no rank is claimed twice: by name pattern, then one by one."""
    if not _clash(paths, ranks):
        return [paths]
    by_pattern: dict[str, list[Path]] = {}
    for p in paths:
        by_pattern.setdefault(_DIGITS.sub("#", p.name), []).append(p)
    groups: list[list[Path]] = []
    for _, same in sorted(by_pattern.items()):
        groups.extend([[p] for p in same] if _clash(same, ranks) else [same])
    return groups


def _clash(paths: list[Path], ranks: Mapping[Path, int | None]) -> bool:
    """Whether two of the traces claim the same rank (an unknown rank claims none yet)."""
    counts = Counter(ranks[p] for p in paths if ranks[p] is not None)
    return any(n > 1 for n in counts.values())


def _group_name(paths: list[Path]) -> str:
    """A group's name in a folder of several: the names' common beginning, else the first file's."""
    prefix = _RANK_TAIL.sub("", os.path.commonprefix([file_run_name(p) for p in paths]))  # noqa: RUF071 (names)
    return prefix if len(prefix) >= MIN_PREFIX_CHARS else file_run_name(paths[0])
