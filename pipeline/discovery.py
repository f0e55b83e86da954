"""From the paths a user gives to the files to ingest: runs, ranks, manifests and power logs.

A directory is searched recursively for `*.json` / `*.json.gz` traces; all traces of one
directory form one run. A `manifest.json` beside them names the study and run (winning over
`--study` / `--run`), maps ranks to files and lists power logs. Without a manifest the run is
`--run` or the directory's name, the study `--study` or `default`. A rank is never guessed:
here it comes from `--rank FILE=N` or the manifest; otherwise the trace's own
`distributedInfo.rank` decides after parsing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from tracehouse.pipeline.discovery_jobs import Discovery, PowerJob, RunSource, TraceJob
from tracehouse.pipeline.discovery_ranks import RankOptions, drop_duplicate_ranks
from tracehouse.pipeline.errors import ManifestError
from tracehouse.pipeline.manifest import MANIFEST_NAME, RunManifest

DEFAULT_STUDY = "default"
TRACE_SUFFIXES = (".json", ".json.gz")


def is_trace_name(path: Path) -> bool:
    """Whether a file name looks like a chrome-trace JSON file (and is not a manifest)."""
    return path.name != MANIFEST_NAME and path.name.endswith(TRACE_SUFFIXES)


def discover(
    paths: Iterable[str | Path],
    *,
    study: str | None = None,
    run: str | None = None,
    ranks: Mapping[str, int] | None = None,
) -> Discovery:
    """Turn user paths into trace and power jobs, grouped into runs."""
    found = Discovery()
    files, explicit = _candidate_files(paths, found)
    by_dir: dict[Path, list[Path]] = {}
    for f in files:
        by_dir.setdefault(f.parent, []).append(f)
    options = RankOptions(ranks or {}, files)
    seen_runs: dict[tuple[str, str], RunSource] = {}
    for directory, dir_files in sorted(by_dir.items()):
        traces = _traces_of(directory, dir_files, explicit)
        _discover_dir(directory, traces, study, run, options, found, seen_runs)
    found.errors.extend(options.unused())
    drop_duplicate_ranks(found)
    return found


def _candidate_files(paths: Iterable[str | Path], found: Discovery) -> tuple[list[Path], set[Path]]:
    """(every candidate file, the ones the user named explicitly)."""
    files: dict[Path, None] = {}
    explicit: set[Path] = set()
    for given in paths:
        path = Path(given).absolute()
        if path.is_dir():
            for f in sorted(path.rglob("*")):
                if f.is_file() and is_trace_name(f):
                    files.setdefault(f, None)
        elif path.is_file():
            files.setdefault(path, None)
            explicit.add(path)
        else:
            found.errors.append((str(given), "no such file or directory"))
    return list(files), explicit


def _traces_of(directory: Path, files: list[Path], explicit: set[Path]) -> list[Path]:
    """The files of one folder that are traces: all of them, unless its manifest lists its traces.

    A manifest that lists its traces is authoritative: the other JSON files beside it (the
    collector's run spec, facts, logs) are not read, unless the user named them.
    """
    manifest_path = directory / MANIFEST_NAME
    if not manifest_path.is_file():
        return files
    try:
        listed = RunManifest.read(manifest_path).traces
    except ManifestError:
        return files  # the manifest's own error is reported once, by _discover_dir
    if not listed:
        return files
    names = {(directory / name).absolute() for name in listed.values()}
    return [f for f in files if f in names or f in explicit]


def _discover_dir(
    directory: Path,
    files: list[Path],
    study: str | None,
    run: str | None,
    options: RankOptions,
    found: Discovery,
    seen_runs: dict[tuple[str, str], RunSource],
) -> None:
    manifest_path = directory / MANIFEST_NAME
    if manifest_path.is_file():
        try:
            manifest = RunManifest.read(manifest_path)
            by_file = _manifest_ranks(manifest_path, manifest)
        except ManifestError as exc:
            found.errors.append((str(manifest_path), exc.reason))
            return
        source = RunSource(manifest=manifest, path=manifest_path)
    else:
        manifest = RunManifest(study=study or DEFAULT_STUDY, run_id=run or directory.name)
        by_file, source = {}, RunSource(manifest=manifest, path=None)
    key = (manifest.study, manifest.run_id)
    if not _add_run(source, key, seen_runs, found):
        return
    power = set(_power_paths(manifest, directory))
    for f in files:
        if f in power:
            continue
        rank, origin = options.rank_of(f), "option"
        if rank is None and f in by_file:
            rank, origin = by_file[f], "manifest"
        found.traces.append(
            TraceJob(
                path=f,
                study=key[0],
                run_id=key[1],
                rank=rank,
                rank_source=origin if rank is not None else None,
            )
        )
    if source.path is not None:
        _add_power(manifest, directory, found)


def _add_run(
    source: RunSource, key: tuple[str, str], seen: dict[tuple[str, str], RunSource], found: Discovery
) -> bool:
    earlier = seen.get(key)
    if earlier is None:
        seen[key] = source
        found.runs.append(source)
        return True
    if earlier.path is not None and source.path is not None and earlier.path != source.path:
        found.errors.append((str(source.path), f"run {key[0]}/{key[1]} is already defined by {earlier.path}"))
        return False
    if earlier.path is None and source.path is not None:
        found.runs[found.runs.index(earlier)] = source
        seen[key] = source
    return True


def _manifest_ranks(manifest_path: Path, manifest: RunManifest) -> dict[Path, int]:
    ranks: dict[Path, int] = {}
    for rank_text, name in manifest.traces.items():
        if not str(rank_text).isdigit():
            raise ManifestError(manifest_path, f"traces key {rank_text!r} is not a rank number")
        ranks[(manifest_path.parent / name).absolute()] = int(rank_text)
    return ranks


def _add_power(manifest: RunManifest, directory: Path, found: Discovery) -> None:
    host = manifest.hosts[0] if len(manifest.hosts) == 1 else None
    for path in _power_paths(manifest, directory):
        if not path.is_file():
            found.errors.append((str(path), f"power log listed in {MANIFEST_NAME} does not exist"))
            continue
        found.power.append(PowerJob(path=path, study=manifest.study, run_id=manifest.run_id, host=host))


def _power_paths(manifest: RunManifest, directory: Path) -> list[Path]:
    """The absolute paths of the power logs a manifest lists."""
    return [(directory / name).absolute() for name in manifest.power.files]
