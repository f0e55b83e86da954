"""The oracle for the other input formats: nccl-tests output, power logs, run manifests.

The contract, per format: the parser returns its rows, or raises that format's file error
(`InputFileError` for nccl-tests, `PowerLogError`, `ManifestError`) in one line naming the file;
it never hangs; and what it accepts lies within the documented limits (`pipeline/common/limits.py`):
every stored number finite and in its range, no repeated power sample, every manifest number
bounded and every path it names (traces, power logs) found by discovery inside its folder. A
verdict is None when the input keeps the contract, else one line saying how it broke it.

Run as a script, this file is the worker (`oracle.Worker` with this script): it reads input paths
on stdin, the format from the name (`*.nccl.txt`, `*.power.log`, `manifest.json`), and answers
one JSON line per input.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

FORMATS = ("nccl-tests", "power", "manifest")
PARSERS = (
    "tracehouse.pipeline.parsers.nccl_tests.parse",
    "tracehouse.pipeline.parsers.power.parse",
    "tracehouse.pipeline.discovery.search",
    "tracehouse.pipeline.ingest.register",
)


def kind_of(path: Path) -> str:
    """The format of an input, from its name."""
    if path.name == "manifest.json":
        return "manifest"
    return "nccl-tests" if ".nccl." in path.name else "power"


def judge(path: Path) -> tuple[str, str | None]:
    """(outcome: accepted | error | bug, finding or None) for one input."""
    from tracehouse.pipeline.common.errors import InputFileError, ManifestError, PowerLogError

    kind = kind_of(path)
    check, parse, expected = {
        "nccl-tests": (_nccl_problem, _parse_nccl, InputFileError),
        "power": (_power_problem, _parse_power, PowerLogError),
        "manifest": (_manifest_problem, _parse_manifest, ManifestError),
    }[kind]
    try:
        parsed = parse(path)
    except expected as exc:
        text = str(exc)
        if "\n" in text or not text.startswith(f"{path}: ") or len(text) > len(str(path)) + 400:
            return "error", f"error is not one short line naming the file: {text[:200]!r}"
        return "error", None
    except Exception as exc:  # the oracle's job: name whatever escaped, and where
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        place = f"{Path(frame.filename).name}:{frame.lineno}"
        return "bug", f"{type(exc).__name__} at {place}: {' '.join(str(exc).split())[:200]}"
    try:
        return "accepted", check(path, parsed)
    except Exception as exc:  # the accepted result breaks where the warehouse uses it
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return "bug", f"accepted, then {type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}"


def _outside(name: str, value: Any, low: float, high: float) -> str | None:
    if value is None:
        return None
    if (isinstance(value, float) and not math.isfinite(value)) or not low <= value <= high:
        return f"accepted {name} = {value!r}, outside [{low:g}, {high:g}]"
    return None


def _parse_nccl(path: Path) -> Any:
    from tracehouse.pipeline.parsers.nccl_tests.parse import parse_nccl_tests

    result = parse_nccl_tests(path)
    return result, result.frame()  # the frame is what ingest stores


def _nccl_problem(path: Path, parsed: Any) -> str | None:
    from tracehouse.pipeline.common.limits import INT32_MAX, NCCL_RANGES

    result, frame = parsed
    ranges = {**NCCL_RANGES, "root": (0, INT32_MAX), "ranks": (1, INT32_MAX), "nodes": (1, INT32_MAX)}
    ranges["avg_busbw_gbps"] = NCCL_RANGES["busbw_gbps"]
    for name, (low, high) in ranges.items():
        for value in frame[name].to_list():
            if problem := _outside(name, value, low, high):
                return problem
    lines = result.dropped_lines() + result.failures()
    if any("\n" in line for line in lines):
        return "a warning line spans several lines"
    return None


def _parse_power(path: Path) -> Any:
    from tracehouse.pipeline.parsers.power.parse import read_power_log

    return read_power_log(path)


def _power_problem(path: Path, log: Any) -> str | None:
    from tracehouse.pipeline.common.limits import POWER_RANGES
    from tracehouse.pipeline.warehouse.schema import POWER_SAMPLES

    frame = log.frame
    if dict(frame.schema) != POWER_SAMPLES:
        return f"columns {dict(frame.schema)} are not POWER_SAMPLES"
    if frame.height == 0:
        return "accepted a log without samples"
    for name, (low, high) in POWER_RANGES.items():
        for value in frame[name].to_list():
            if problem := _outside(name, value, low, high):
                return problem
    if frame["ts_unix_ns"].null_count():
        return "accepted a sample without a time"
    if frame.is_duplicated().any():
        return "accepted a repeated sample"
    if any("\n" in line for line in log.dropped):
        return "a warning line spans several lines"
    return None


def _parse_manifest(path: Path) -> Any:
    from tracehouse.pipeline.common.manifest import RunManifest

    return RunManifest.read(path)


def _manifest_problem(path: Path, manifest: Any) -> str | None:
    from tracehouse.pipeline.common.limits import MANIFEST_BOUNDS, MANIFEST_INT32_BOUND
    from tracehouse.pipeline.common.manifest import INT32_FIELDS
    from tracehouse.pipeline.discovery.jobs import RunSource
    from tracehouse.pipeline.ingest.register import manifest_row

    values = dataclasses.asdict(manifest)
    numbers = [(k, v) for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    numbers += [(k, v) for k, v in values["power"].items() if isinstance(v, int) and not isinstance(v, bool)]
    numbers += [("fsdp_units", v) for v in values["fsdp_units"].values()]
    for name, value in numbers:
        high = MANIFEST_INT32_BOUND if name in INT32_FIELDS else MANIFEST_BOUNDS.get(name, 2**63)
        if problem := _outside(name, value, 0, high) or (None if value > 0 else f"accepted {name} = {value}"):
            return problem
    if manifest.tokens_per_step and manifest.flops_per_token and manifest.peak_flops and manifest.world_size:
        flops = manifest.tokens_per_step * manifest.flops_per_token
        mfu = flops / (manifest.peak_flops * manifest.world_size)
        if not math.isfinite(mfu):
            return f"accepted run facts whose MFU is {mfu}"
    row = manifest_row(RunSource(manifest=manifest, path=path))
    json.dumps(row, default=str, allow_nan=False)  # what the catalog stores: JSON, finite
    for value in row.values():
        if isinstance(value, str):
            value.encode("utf-8")  # DuckDB VARCHAR: a lone surrogate would fail the insert
    return _discovery_problem(path)


def _discovery_problem(path: Path) -> str | None:
    """Discovery of the manifest's folder never raises, and every job it makes lies inside the folder."""
    from tracehouse.pipeline.discovery.search import discover

    folder = path.parent.resolve()
    found = discover([path.parent])
    for job in [*found.traces, *found.power]:
        if not Path(job.path).resolve().is_relative_to(folder):
            return f"discovery loads {job.path}, outside the manifest's folder"
    if any("\n" in str(reason) for _, reason in found.errors):
        return "a discovery error spans several lines"
    return None


def worker_main(judge_one: Callable[[Path], tuple[str, str | None]] = judge) -> None:
    """Answer one JSON verdict line per input path read from stdin."""
    for module in PARSERS:  # loaded before the first input's clock starts
        importlib.import_module(module)

    print(json.dumps({"ready": True, "scanner": False}), flush=True)
    for line in sys.stdin:
        path = Path(line.rstrip("\n"))
        outcome, found = judge_one(path)
        print(json.dumps({"finding": found, "kinds": [kind_of(path), outcome]}), flush=True)


if __name__ == "__main__":
    worker_main()
