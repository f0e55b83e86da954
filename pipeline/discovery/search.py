"""From the paths a user gives to the files to ingest: runs, ranks, manifests, power logs, nccl-tests.

A directory is searched recursively for `*.json` / `*.json.gz` traces. A `manifest.json` beside
them makes all of them one run: it names the study and run (winning over `--study` / `--run`),
maps ranks to files and lists power logs. Without a manifest, `--run` makes a folder's traces
one run; else the folder splits into runs as `grouping` says (a trace without distributedInfo
is a run of its own, the others group by world size). The study is `--study` or `default`. A
rank is never guessed: it comes from `--rank FILE=N` or the manifest, else the trace's own
`distributedInfo.rank` decides after parsing; a run's only trace without distributedInfo is
rank 0 (a process that never initialised torch.distributed).

A JSON file found by searching that is not a trace (no `traceEvents`, not an array of events:
a `config.json`, metrics) is skipped and named in `not_traces` (see `sniff`); a file the user
names is always read as a trace. Nothing else found is dropped in silence: a file listed in a
manifest that does not exist, a file listed for two ranks, or every trace of a folder whose
manifest is invalid becomes an error of that path, which ingest records in `ingest_errors`.

nccl-tests output (`.txt`, `.log`, `.out` files whose first bytes say so, see `sniff`), found by
searching or named, is read as network calibration points of a study: the study of the
manifest.json beside it, else `--study`, else `default`; it belongs to no run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracehouse.pipeline.common.errors import ManifestError
from tracehouse.pipeline.common.manifest import MANIFEST_NAME, RunManifest
from tracehouse.pipeline.discovery.grouping import RunGroup, group_folder
from tracehouse.pipeline.discovery.header import read_header
from tracehouse.pipeline.discovery.jobs import Discovery, NcclTestsJob, PowerJob, RunSource, TraceJob
from tracehouse.pipeline.discovery.locations import StoreUnavailable, files_under, location
from tracehouse.pipeline.discovery.node_power import late_node_logs
from tracehouse.pipeline.discovery.ranks import RANK_OPTION, RankOptions
from tracehouse.pipeline.discovery.sniff import (
    is_nccl_tests_output,
    is_profiler_trace_name,
    looks_like_trace,
)

DEFAULT_STUDY = "default"
TRACE_SUFFIXES = (".json", ".json.gz")


@dataclass(kw_only=True)
class _Candidates:
    """What the given paths hold: trace-named files, the ones named explicitly, folders with a manifest."""

    files: list[Path] = field(default_factory=list)
    explicit: set[Path] = field(default_factory=set)
    manifest_dirs: set[Path] = field(default_factory=set)  # searched folders holding a manifest.json
    nccl_tests: list[Path] = field(default_factory=list)  # nccl-tests output, found or named


@dataclass(kw_only=True)
class _Folder:
    """One folder's run as far as its manifest allows: its traces and the ranks the manifest gives."""

    directory: Path
    traces: list[Path]
    manifest_path: Path | None = None  # None: no manifest.json beside the traces
    manifest: RunManifest | None = None  # None with a manifest_path: the manifest is invalid
    problem: str | None = None  # why the folder's traces cannot be ingested
    listed: dict[Path, int] = field(default_factory=dict)  # rank of each existing file the manifest lists


def is_trace_name(path: Path) -> bool:
    """Whether a file name looks like a chrome-trace JSON file (and is not a manifest)."""
    return path.name != MANIFEST_NAME and path.name.endswith(TRACE_SUFFIXES)


def discover(
    paths: Iterable[str | Path],
    *,
    study: str | None = None,
    run: str | None = None,
    ranks: Mapping[str, int] | None = None,
    facts: Mapping[str, Any] | None = None,
) -> Discovery:
    """Turn user paths into trace and power jobs, grouped into runs.

    `facts` are manifest fields stated on the command line (tokens_per_step, strategy, ...):
    they describe every run found without a manifest.json.
    """
    found = Discovery()
    candidates = _candidates(paths, found)
    by_dir: dict[Path, list[Path]] = {d: [] for d in candidates.manifest_dirs}
    for f in candidates.files:
        by_dir.setdefault(f.parent, []).append(f)
    folders = [_read_folder(d, files, candidates, found) for d, files in sorted(by_dir.items())]
    for folder in folders:
        folder.traces = _without_other_json(folder, candidates, found)
    options = RankOptions(ranks or {}, [f for folder in folders for f in folder.traces])
    seen_runs: dict[tuple[str, str], RunSource] = {}
    for folder in folders:
        _discover_folder(folder, study, run, options, found, seen_runs, dict(facts or {}))
    found.errors.extend(options.unused())
    _add_nccl_tests(candidates.nccl_tests, folders, study, found)
    return found


def _candidates(paths: Iterable[str | Path], found: Discovery) -> _Candidates:
    """Every candidate trace under the given paths, plus where the user named files and manifests."""
    files: dict[Path, None] = {}
    nccl_tests: dict[Path, None] = {}
    candidates = _Candidates()
    for given in paths:
        try:
            path = location(given)  # absolute, without '..' (links stay as given); or a store's object
            _add_candidates(path, files, nccl_tests, candidates, found, given)
        except StoreUnavailable as exc:
            found.errors.append((str(given), str(exc)))
        except OSError as exc:  # a store that refuses the listing (denied, no such bucket)
            found.errors.append((str(given), f"cannot list: {exc.strerror or exc}"))
    candidates.files = list(files)
    candidates.nccl_tests = list(nccl_tests)
    return candidates


def _add_candidates(
    path: Path,
    files: dict[Path, None],
    nccl_tests: dict[Path, None],
    candidates: _Candidates,
    found: Discovery,
    given: str | Path,
) -> None:
    """The candidates under one given path: a folder (or store prefix) searched, or a file named."""
    if path.is_dir():
        for f in files_under(path):
            if is_trace_name(f):
                files.setdefault(f, None)
            elif f.name == MANIFEST_NAME:
                candidates.manifest_dirs.add(f.parent)
            elif is_nccl_tests_output(f):
                nccl_tests.setdefault(f, None)
    elif path.is_file() and is_nccl_tests_output(path):
        nccl_tests.setdefault(path, None)
    elif path.is_file():
        files.setdefault(path, None)
        candidates.explicit.add(path)
    elif path.exists():
        found.errors.append((str(given), "not a regular file"))
    else:
        found.errors.append((str(given), "no such file or directory"))


def _without_other_json(folder: _Folder, candidates: _Candidates, found: Discovery) -> list[Path]:
    """A folder's traces less the JSON files that searching found and that are no trace (named, skipped).

    Files the user named, files the manifest lists and `*.pt.trace.json*` files are always traces.
    """
    kept = []
    for path in folder.traces:
        if (
            path in candidates.explicit
            or path in folder.listed
            or is_profiler_trace_name(path)
            or looks_like_trace(path)
        ):
            kept.append(path)
        else:
            found.not_traces.append(str(path))
    return kept


def _read_folder(directory: Path, files: list[Path], candidates: _Candidates, found: Discovery) -> _Folder:
    """A folder's traces and manifest; the manifest's own problems are reported here, once."""
    manifest_path = directory / MANIFEST_NAME
    if not manifest_path.is_file():
        return _Folder(directory=directory, traces=files)
    try:
        manifest = RunManifest.read(manifest_path)
        if outside := _entry_outside(manifest_path, manifest):
            raise ManifestError(manifest_path, outside)
    except ManifestError as exc:
        found.errors.append((str(manifest_path), exc.reason))
        problem = f"its run's {MANIFEST_NAME} is invalid: {exc.reason}"
        return _Folder(directory=directory, traces=files, manifest_path=manifest_path, problem=problem)
    ranks_of = _listed_ranks(manifest_path, manifest)
    for path, ranks in ranks_of.items():
        if problem := _listing_problem(manifest_path, path, ranks):
            found.errors.append((str(path), problem))
    listed = {path: ranks[0] for path, ranks in ranks_of.items() if len(ranks) == 1 and path.is_file()}
    twice = {path for path, ranks in ranks_of.items() if len(ranks) > 1}
    traces = [f for f in _traces_of(directory, files, manifest, listed, candidates) if f not in twice]
    return _Folder(
        directory=directory, traces=traces, manifest_path=manifest_path, manifest=manifest, listed=listed
    )


def _traces_of(
    directory: Path,
    files: list[Path],
    manifest: RunManifest,
    listed: dict[Path, int],
    candidates: _Candidates,
) -> list[Path]:
    """The traces of a folder with a manifest: all its trace files, unless the manifest lists its traces.

    A manifest that lists its traces is authoritative: the listed files are the traces, whatever
    their names, and the other JSON files beside it (the collector's run spec, facts, logs) are
    not read unless the user named them. From a folder that was not searched (the user named
    some of its files) only the named files are read.
    """
    if not manifest.traces:
        return files
    named = {f for f in files if f in candidates.explicit}
    if directory in candidates.manifest_dirs:
        named.update(listed)
    return sorted(named)


def _listed_ranks(manifest_path: Path, manifest: RunManifest) -> dict[Path, list[int]]:
    """The ranks a manifest lists for each file (keys and names were checked when it was read)."""
    ranks_of: dict[Path, list[int]] = {}
    for rank_text, name in manifest.traces.items():
        ranks_of.setdefault((manifest_path.parent / name).absolute(), []).append(int(rank_text))
    return ranks_of


def _entry_outside(manifest_path: Path, manifest: RunManifest) -> str | None:
    """Why a path the manifest names leaves the manifest's folder (symlinks resolved first), or None."""
    folder = manifest_path.parent.resolve()
    named = [(f"traces[{rank!r}]", name) for rank, name in manifest.traces.items()]
    named += [(f"power.files[{i}]", name) for i, name in enumerate(manifest.power.files)]
    for entry, name in named:
        try:
            target = (manifest_path.parent / name).resolve()
            target.exists()  # raises for a name the system refuses (too long)
        except (OSError, RuntimeError) as exc:  # a symlink loop
            why = getattr(exc, "strerror", None) or str(exc)[:120]
            return f"{entry} {name[:80]!r} cannot be resolved: {why}"
        if not target.is_relative_to(folder):
            return f"{entry} {name[:80]!r} resolves outside the manifest's folder (to {str(target)[:200]})"
    return None


def _listing_problem(manifest_path: Path, path: Path, ranks: list[int]) -> str | None:
    """Why a file the manifest lists cannot be read as the trace of its ranks, or None."""
    if not path.is_file():
        return f"the trace of {_ranks_text(ranks)} listed in {manifest_path} does not exist"
    if len(ranks) > 1:
        return f"{manifest_path} lists it as the trace of {_ranks_text(ranks)}; a file holds one rank"
    return None


def _ranks_text(ranks: list[int]) -> str:
    """'rank 3', 'ranks 0 and 1', 'ranks 0, 1 and 2'."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks[:-1]) + f" and {ranks[-1]}"


def _discover_folder(
    folder: _Folder,
    study: str | None,
    run: str | None,
    options: RankOptions,
    found: Discovery,
    seen_runs: dict[tuple[str, str], RunSource],
    facts: Mapping[str, Any],
) -> None:
    """Add the folder's runs, their trace jobs and power jobs, or fail its files with the reason."""
    if folder.problem is not None:
        _fail_all(folder.traces, folder.problem, options, found)
        return
    if folder.manifest is not None:
        source = RunSource(manifest=folder.manifest, path=folder.manifest_path)
        _discover_run(
            folder, source, folder.traces, folder.manifest.world_size in (None, 1), options, found, seen_runs
        )
        return
    chosen = study or DEFAULT_STUDY
    if run is not None:
        source = RunSource(manifest=RunManifest(study=chosen, run_id=run, **facts), path=None)
        _discover_run(folder, source, folder.traces, True, options, found, seen_runs)
        return
    stated = {p: r for p in folder.traces if (r := options.rank_of(p)) is not None}
    headers = {p: read_header(p) for p in folder.traces}
    for group in group_folder(folder.directory, folder.traces, headers, stated):
        run_id = group.run_id if group.named_after_folder else _free_name(chosen, group, folder, seen_runs)
        source = RunSource(manifest=RunManifest(study=chosen, run_id=run_id, **facts), path=None)
        _discover_run(folder, source, list(group.traces), group.single_process, options, found, seen_runs)


def _free_name(study: str, group: RunGroup, folder: _Folder, seen: dict[tuple[str, str], RunSource]) -> str:
    """A run name taken from file names, made unique in its study: the folder's name first, then a number."""
    name = group.run_id
    if (study, name) in seen:
        name = f"{folder.directory.name}-{group.run_id}"
    base, n = name, 2
    while (study, name) in seen:
        name, n = f"{base}-{n}", n + 1
    return name


def _discover_run(
    folder: _Folder,
    source: RunSource,
    traces: list[Path],
    may_be_alone: bool,
    options: RankOptions,
    found: Discovery,
    seen_runs: dict[tuple[str, str], RunSource],
) -> None:
    """Add one run of a folder with its traces (and its manifest's power logs), or fail them.

    `may_be_alone`: when the run has one trace, a trace without distributedInfo is its rank 0.
    """
    manifest = source.manifest
    key = (manifest.study, manifest.run_id)
    conflict = _add_run(source, key, seen_runs, found)
    if conflict is not None:
        found.errors.append((str(source.path), conflict))
        reason = f"its run's {MANIFEST_NAME} cannot be used: {conflict}"
        _fail_all(traces + _power_paths(manifest, folder.directory), reason, options, found)
        return
    power = set(_power_paths(manifest, folder.directory))
    jobs = [f for f in traces if f not in power]
    alone = may_be_alone and len(jobs) == 1
    for f in jobs:
        _add_trace(f, key, folder.listed.get(f), options, found, single_process=alone)
    if source.path is not None:
        _add_power(manifest, folder.directory, found)


def _fail_all(paths: list[Path], reason: str, options: RankOptions, found: Discovery) -> None:
    """Every path fails with one reason (a --rank naming one of them counts as used, not unknown)."""
    for path in paths:
        options.rank_of(path)
        found.errors.append((str(path), reason))


def _add_trace(
    path: Path,
    key: tuple[str, str],
    listed: int | None,
    options: RankOptions,
    found: Discovery,
    *,
    single_process: bool,
) -> None:
    """Add one trace job; a --rank that contradicts the manifest's rank fails the file instead."""
    option = options.rank_of(path)
    if option is not None and listed is not None and option != listed:
        reason = f"{RANK_OPTION} says rank {option} but {MANIFEST_NAME} lists it as rank {listed}"
        found.errors.append((str(path), reason))
        return
    rank, origin = (option, "option") if option is not None else (listed, "manifest")
    found.traces.append(
        TraceJob(
            path=path,
            study=key[0],
            run_id=key[1],
            rank=rank,
            rank_source=origin if rank is not None else None,
            single_process=single_process and rank is None,
        )
    )


def _add_run(
    source: RunSource, key: tuple[str, str], seen: dict[tuple[str, str], RunSource], found: Discovery
) -> str | None:
    """Record a run once; the reason a second manifest of the same run cannot be used, else None."""
    earlier = seen.get(key)
    if earlier is None:
        seen[key] = source
        found.runs.append(source)
        return None
    if earlier.path is not None and source.path is not None and earlier.path != source.path:
        return f"run {key[0]}/{key[1]} is already defined by {earlier.path}"
    if earlier.path is None and source.path is not None:
        found.runs[found.runs.index(earlier)] = source
        seen[key] = source
    return None


def _add_power(manifest: RunManifest, directory: Path, found: Discovery) -> None:
    """A power job for each log the manifest lists; a missing one is an error."""
    host = manifest.hosts[0] if len(manifest.hosts) == 1 else None
    for path in _power_paths(manifest, directory):
        if not path.is_file():
            found.errors.append((str(path), f"power log listed in {MANIFEST_NAME} does not exist"))
            continue
        found.power.append(PowerJob(path=path, study=manifest.study, run_id=manifest.run_id, host=host))


def _power_paths(manifest: RunManifest, directory: Path) -> list[Path]:
    """The absolute paths of the power logs a manifest lists, and those its other nodes reported late."""
    names = [*manifest.power.files, *late_node_logs(manifest, directory)]
    return [(directory / name).absolute() for name in names]


def _add_nccl_tests(paths: list[Path], folders: list[_Folder], study: str | None, found: Discovery) -> None:
    """An nccl-tests job per file that no manifest claims as a trace or power log."""
    manifests = {folder.directory: folder.manifest for folder in folders if folder.manifest is not None}
    claimed = {job.path for job in found.traces} | {job.path for job in found.power}
    for path in paths:
        if path in claimed:
            continue
        manifest = manifests.get(path.parent)
        chosen = manifest.study if manifest is not None else study or DEFAULT_STUDY
        found.nccl_tests.append(NcclTestsJob(path=path, study=chosen))
