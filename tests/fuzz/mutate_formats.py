"""Mutation fuzzing of the other input formats: nccl-tests output, power logs, run manifests.

    python tests/fuzz/mutate_formats.py [--seconds 60] [--seed 0] [--out DIR] [--inputs N]

Seeds: the real files in ../shared/data/nccl-tests and ../shared/data/power, small logs in the
formats tracehouse's own samplers write (NVML, dcgmi, nvidia-smi; no real capture of them is
public), and the manifests of sample_traces/. Each seed is first judged as it is; then input i
(formats in turn) is 1-3 mutations of one seed, chosen by `random.Random(f"{seed}:{i}")`, so
input i is the same on every run: numbers replaced by out-of-range ones (negative, NaN, inf,
1e308, 10^26, a year-1 date, a 10^23 stamp), tokens replaced, lines repeated, dropped, swapped
or spliced from another seed, truncation, byte flips, invalid UTF-8, 1 MB lines, gzip; a
manifest's fields set to such numbers, to paths out of its folder (absolute, `../`, a symlink
out, a symlink loop), to 10^5-deep arrays or 2 MiB strings, and keys given twice. Every input
runs in a worker process with a time limit (`format_oracle`); each finding is printed and its
input saved under --out. Exit status 1 when there is any finding.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from format_oracle import FORMATS  # noqa: E402
from oracle import Worker  # noqa: E402
from support.testdata import SAMPLE_TRACES, SHARED_DATA  # noqa: E402

SECONDS_VARIABLE = "TRACEHOUSE_FUZZ_SECONDS"
INPUT_SECONDS = 20.0  # per input: far above any input here (the slowest take well under 1 s)
ORACLE = Path(__file__).resolve().with_name("format_oracle.py")
MAX_INPUT_BYTES = 16 << 20
SUFFIX = {"nccl-tests": ".nccl.txt", "power": ".power.log", "manifest": ".json"}

# fmt: off
BAD_NUMBERS = ["-1", "-0", "0", "nan", "NaN", "-nan", "inf", "-inf", "+Inf", "Infinity", "1e308", "-1e308",
               "1e400", "1" + "0" * 26, "100000000000000000000000", "9223372036854775807",
               "9223372036854775808", "-9223372036854775809", "2147483648", "4294967295", "1e23", "1.5e3",
               "0x10", "1_000", "²", "٣", "", "N/A", "[N/A]", "abc", "1" * 5000, "140737488355328.0",
               "9223372036854775792", "-36.18", "5001", "4999.9", "0.0001"]
BAD_DATES = ["0001/01/01 00:00:00.000", "9999/12/31 23:59:59.999", "1969/12/31 23:59:59.999",
             "2262/04/12 00:00:00.000", "0001-01-01T00:00:00", "9999-12-31T23:59:59+00:00",
             "2026-02-30T00:00:00+00:00", "1960-01-01T00:00:00-14:00"]
BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x80", b"\xf0\x9f\x98"]
MANIFEST_VALUES = ["1e400", "-1e400", "NaN", "Infinity", "-1", "0", "0.5", "4611686018427387904", "1e308",
                   "1e18", "1e15", "1099511627776", "2147483648", "9223372036854775808", "1" * 5000,
                   '"../outside.csv"', '"OUTSIDE"', '"link.csv"', '"link.json"', '"loop.json"', '"."', '""',
                   '"sub/../../outside.json"', '"rank0.pt.trace.json.gz"', '"\\ud800"', '"x\\u0000y"',
                   "null", "true", "[]", "{}", '{"0": "a.json", "0": "b.json"}', '{"99": "rank0.json"}',
                   "[" * 100_000 + "]" * 100_000, '"' + "x" * (2 << 20) + '"',
                   '["power.csv", "/etc/hostname"]']
# fmt: on
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
DATE = re.compile(rb"\d{4}[/-]\d\d[/-]\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d)?")


@dataclass(frozen=True)
class Seed:
    kind: str
    name: str
    data: bytes


def sampler_seeds() -> list[Seed]:
    """Small logs in tracehouse's sampler formats (format_log_header and the tools' own lines)."""
    from tracehouse.pipeline.common.power_log import NVML_HEADER, format_log_header

    ts = 1_783_996_973_000_000_000
    nvml = format_log_header(source="nvml", host="n1", interval_ms=100, clock="host-realtime") + NVML_HEADER
    nvml += "".join(
        f"\n{ts + i * 10**8},{i % 2},{250000 + i},{10**6 + i},{50 + i},{90},{3 << 30}" for i in range(6)
    )
    dmon = format_log_header(source="dcgmi", host="n1", interval_ms=100, clock="host-realtime-at-read")
    dmon += f"{ts}\t#Entity   POWER   TOTEC   TMPTR   GPUTL   FBUSD\n"
    dmon += f"{ts}\tID        W       mJ      C       %  MiB\n"
    dmon += "".join(
        f"{ts + i * 10**8}\tGPU {i % 2}   {250.5 + i}   {10**6 + i}   45   98   40000\n" for i in range(6)
    )
    smi = format_log_header(
        source="nvidia-smi", host="n1", interval_ms=100, clock="nvidia-smi-localtime", utc_offset_s=7200
    )
    columns = (
        "timestamp, index, uuid, power.draw [W], temperature.gpu, utilization.gpu [%], memory.used [MiB]"
    )
    smi += f"{ts}\t{columns}\n"
    smi += "".join(
        f"{ts + i}\t2026/07/14 08:12:5{i}.353, {i % 2}, GPU-x, {631.95 + i} W, 45, 98 %, 40000 MiB\n"
        for i in range(6)
    )
    return [
        Seed("power", f"sampler-{n}", t.encode()) for n, t in (("nvml", nvml), ("dcgmi", dmon), ("smi", smi))
    ]


def load_seeds(shared: Path) -> list[Seed]:
    """Every seed, formats in a fixed order."""
    seeds = [
        Seed("nccl-tests", p.name, p.read_bytes()) for p in sorted((shared / "nccl-tests").glob("*.txt"))
    ]
    power = [
        *sorted((shared / "power" / "nvidia-smi").glob("*")),
        shared / "power/dcgm-exporter/a100_mig_metrics.prom",
    ]
    seeds += [Seed("power", p.name, p.read_bytes()) for p in power] + sampler_seeds()
    manifests = sorted(SAMPLE_TRACES.rglob("manifest.json"))
    seeds += [Seed("manifest", str(p.relative_to(SAMPLE_TRACES)), p.read_bytes()) for p in manifests]
    return seeds


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def replace_number(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    found = list(NUMBER.finditer(data))
    if not found:
        return data
    m = rng.choice(found)
    return data[: m.start()] + rng.choice(BAD_NUMBERS).encode() + data[m.end() :]


def replace_date(data: bytes, rng: random.Random, seeds: list[Seed]) -> bytes:
    found = list(DATE.finditer(data))
    if not found:
        return replace_number(data, rng, seeds)
    m = rng.choice(found)
    return data[: m.start()] + rng.choice(BAD_DATES).encode() + data[m.end() :]


def replace_token(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    tokens = re.split(rb"(\s+|,)", lines[i])
    j = rng.randrange(len(tokens))
    tokens[j] = rng.choice([*BAD_NUMBERS, "GPU", "#", "ID", "GPU-I", "[N/A]", "#Entity", "size"]).encode()
    lines[i] = b"".join(tokens)
    return b"\n".join(lines)


def repeat_line(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    lines = _lines(data)
    i = rng.randrange(len(lines))
    lines[i : i + 1] = [lines[i]] * rng.choice([2, 3, 1000])
    return b"\n".join(lines)


def drop_line(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    lines = _lines(data)
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def swap_lines(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    lines = _lines(data)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def splice(data: bytes, rng: random.Random, seeds: list[Seed]) -> bytes:
    other = _lines(rng.choice(seeds).data)
    lines = _lines(data)
    start = rng.randrange(len(other))
    lines[rng.randrange(len(lines) + 1) : 0] = other[start : start + rng.choice([1, 5, 50])]
    return b"\n".join(lines)


def truncate(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def flip(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(rng.choice([1, 2, 8])):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def bad_utf8(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(BAD_UTF8) + data[at:]


def long_line(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice([b"9", b"x", b" ", b"#"]) * 1_000_000 + data[at:]


LINE_MUTATIONS: list[Callable[[bytes, random.Random, list[Seed]], bytes]] = [
    replace_number, replace_number, replace_number, replace_date, replace_token, replace_token, repeat_line,
    drop_line, swap_lines, splice, truncate, flip, bad_utf8, long_line,
]  # fmt: skip


def set_field(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    """Set one manifest field (top level, power.*, traces or model_config) to a hostile JSON text."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return data
    if not isinstance(doc, dict):
        return data
    places: list[tuple[dict, str]] = [(doc, k) for k in doc] + [(doc, "colour")]
    for inner in ("power", "traces", "model_config", "fsdp_units"):
        if isinstance(doc.get(inner), dict):
            places += [(doc[inner], k) for k in doc[inner]] + [
                (doc[inner], "files" if inner == "power" else "7")
            ]
    target, key = rng.choice(places)
    target[key] = "\x00PLACEHOLDER\x00"
    text = json.dumps(doc).replace('"\\u0000PLACEHOLDER\\u0000"', rng.choice(MANIFEST_VALUES), 1)
    return text.encode()


def duplicate_key(data: bytes, rng: random.Random, _: list[Seed]) -> bytes:
    key = rng.choice([b'"study": "again"', b'"run_id": "again"', b'"traces": {}', b'"world_size": 4'])
    return data.replace(b"{", b"{" + key + b",", 1)


MANIFEST_MUTATIONS = [
    set_field,
    set_field,
    set_field,
    set_field,
    duplicate_key,
    replace_number,
    truncate,
    flip,
]


def make_input(seeds: list[Seed], kind: str, rng: random.Random) -> tuple[bytes, str]:
    """(input bytes, what was done): 1-3 mutations of one seed of the kind; power gzipped at times."""
    seed = rng.choice([s for s in seeds if s.kind == kind])
    data, done = seed.data, [seed.name]
    same = [s for s in seeds if s.kind == kind]
    mutations = MANIFEST_MUTATIONS if kind == "manifest" else LINE_MUTATIONS
    for _ in range(rng.choice([1, 1, 2, 3])):
        mutation = rng.choice(mutations)
        mutated = mutation(data, rng, same)
        if len(mutated) <= MAX_INPUT_BYTES:  # a 1 MB line repeated 1000 times is a test of the disk
            data = mutated
            done.append(mutation.__name__)
    if kind == "power" and rng.random() < 0.1:
        data = gzip.compress(data, mtime=0)
        data = data[: rng.randrange(len(data))] if rng.random() < 0.3 else data
        done.append("gzip")
    return data, " ".join(done)


@dataclass
class Report:
    inputs: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    findings: list[str] = field(default_factory=list)
    by_kind: Counter[str] = field(default_factory=Counter)

    def line(self) -> str:
        kinds = ", ".join(
            f"{k}: {self.inputs[k]} inputs, {self.by_kind[k]} findings"
            + "".join(f", {o.split('/')[1]} {n}" for o, n in sorted(self.outcomes.items()) if o.startswith(k))
            for k in FORMATS
        )
        return f"fuzz formats: {sum(self.inputs.values())} inputs, {len(self.findings)} findings ({kinds})"


def prepare_run(work: Path) -> Path:
    """The folder a fuzzed manifest lands in: the files it may name, and files and links out of it."""
    run = work / "run"
    run.mkdir(parents=True)
    for name in ("rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz", "rank0.json", "a.json", "power.csv"):
        (run / name).write_bytes(b"{}")
    (work / "outside.csv").write_text("outside")
    (work / "outside.json").write_text("{}")
    (run / "link.csv").symlink_to(work / "outside.csv")
    (run / "link.json").symlink_to(work / "outside.json")
    (run / "loop.json").symlink_to(run / "loop.json")
    return run


def _judge_and_keep(
    worker: Worker, kind: str, data: bytes, what: str, work: Path, out: Path, report: Report
) -> None:
    if kind == "manifest":
        path = work / "run" / "manifest.json"
        data = data.replace(b'"OUTSIDE"', json.dumps(str(work / "outside.csv")).encode())
    else:
        path = work / f"input{SUFFIX[kind]}"
    path.write_bytes(data)
    found, kinds = worker.judge(path, INPUT_SECONDS)
    report.inputs[kind] += 1
    report.outcomes[f"{kind}/{kinds[1]}"] += 1
    if found:
        kept = out / f"finding-{len(report.findings):03d}-{kind}{SUFFIX[kind]}"
        kept.write_bytes(data)
        report.findings.append(f"{kept.name}: {found} [{what}]")
        report.by_kind[kind] += 1
        print(f"FINDING {report.findings[-1]}", flush=True)


def fuzz(seconds: float, seed: int, out: Path, *, limit: int | None = None) -> Report:
    """The seeds as they are, then mutated inputs for `seconds` (or `limit` inputs); the report."""
    deadline = time.monotonic() + seconds
    seeds = load_seeds(SHARED_DATA)
    report, i = Report(), 0
    work = Path(tempfile.mkdtemp(prefix="tracehouse-fuzz-formats-"))
    try:
        prepare_run(work)
        worker = Worker(out / "worker.log", script=ORACLE)
        try:
            for s in seeds:
                _judge_and_keep(worker, s.kind, s.data, f"seed {s.name}", work, out, report)
            while time.monotonic() < deadline and (limit is None or i < limit):
                kind = FORMATS[i % len(FORMATS)]
                data, what = make_input(seeds, kind, random.Random(f"{seed}:{i}"))
                _judge_and_keep(worker, kind, data, f"input {i}: {what}", work, out, report)
                i += 1
        finally:
            worker.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get(SECONDS_VARIABLE, "60")))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--inputs", type=int, default=None, help="stop after this many mutated inputs")
    parser.add_argument(
        "--out", type=Path, default=None, help="where findings are kept (default: a temp dir)"
    )
    args = parser.parse_args(argv)
    if not (SHARED_DATA / "nccl-tests").is_dir() or not (SHARED_DATA / "power").is_dir():
        print(
            f"fuzz formats: {SHARED_DATA}/nccl-tests or /power is absent: nothing to mutate", file=sys.stderr
        )
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="tracehouse-fuzz-formats-out-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    report = fuzz(args.seconds, args.seed, out, limit=args.inputs)
    print(f"{report.line()} in {time.monotonic() - started:.0f} s; findings kept in {out}")
    for finding in report.findings:
        print(f"  {finding}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
