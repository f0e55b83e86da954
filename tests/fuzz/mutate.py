"""Mutation fuzzing of parse_trace: real traces from ../shared/data/traces, mutated, judged by `oracle`.

    python tests/fuzz/mutate.py [--seconds 120] [--seed 0] [--out DIR] [--scanner sanitized|portable]
    python tests/fuzz/mutate.py --real-traces --scanner portable

Seeds are the small real traces whole and slices (a few hundred events) of larger ones.
Each input is 1-3 mutations of one seed, chosen by `random.Random(f"{seed}:{i}")`, so input i
is the same on every run (how many inputs run depends on the time given): byte flips,
truncation, splices, wrong JSON types for ph/ts/dur/pid/tid/args and the args that become
columns, huge/negative/exponent numbers, 1 MB strings, invalid UTF-8, lone surrogates,
nesting up to 10^5 deep, odd top-level fields, escaped keys, and gzip corruption. Every input
runs through both decoders in a worker process with a time limit (`oracle`); each finding is
printed and its input saved under --out. Exit status 1 when there is any finding.
`--real-traces` runs the shared traces unmutated instead (a scanner build against msgspec).
`--scanner` names the C scanner under test: the installed one, or one built here with
`-fsanitize=address,undefined` (any report aborts the worker: a finding) or without SSE2.
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
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from oracle import SCANNER_SO_VARIABLE, Worker  # noqa: E402
from scanner_build import build_scanner, sanitizer_env  # noqa: E402
from support.testdata import SHARED_DATA  # noqa: E402

SECONDS_VARIABLE = "TRACEHOUSE_FUZZ_SECONDS"
INPUT_SECONDS = 30.0  # per input, both decoders: far above any input here (the slowest take ~1 s)
# fmt: off
WHOLE = ("hta/event_sync_multi_stream.json.gz", "kineto/h100_harness_before_fix.json.gz",
         "kineto/compute_properties_small.json.gz", "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
         "tracelens/mi300_torch_compile_triton.json.gz")
SLICED = ("tracelens/h100_bert_small.json.gz", "tracelens/mi210_gpu_only.json.gz",
          "hta/alexnet_cuda_sync.json.gz", "hta/pair_sampled_rank-0.json.gz",
          "tracelens/mi300_sglang_decode.json.gz", "kineto/resnet50_bare_array_2020.pt.trace.json.gz",
          "hta/nccl_parser_config_rank0.json.gz", "tracelens/mi300_ddp_rank0_of8.json.gz")
SLICE_EVENTS = 300
INTERESTING = ("nccl", "gloo", "ProfilerStep", "record_param_comms", "Memcpy", "cudaLaunch", "[memory]",
               "nn.Module")

NUMBERS = [b"1e400", b"-1e400", b"1e308", b"1.7976931348623157e308", b"1.7976931348623159e308", b"1e-400",
           b"-0", b"0", b"-1", b"-0.0", b"2147483647", b"2147483648", b"-2147483649", b"9007199254740992",
           b"9007199254740993.5", b"8796093022208.0005", b"9223372036854775807", b"9223372036854775808",
           b"-9223372036854775809", b"18446744073709551616", b"1" * 4300, b"1" * 4301, b"-" + b"1" * 4300,
           b"1.5e3", b"1E5", b"123456789012345678901234567890.5", b"1" * 31 + b".5", b"0.0005", b"1.0005",
           b"2.5e-3", b"1712195495519689.047", b"1712195495519689.0475", b"1e17", b"9.3e18",
           b"1" * 400 + b".5", b"0." + b"0" * 400 + b"1", b"1e" + b"9" * 30]
STRINGS = [b'"\\ud800"', b'"\\udc00x"', b'"\\ud800\\udc00"', b'"\\ud83d\\ude00"', b'"\\ud800\\u0041"',
           b'"\\x"',
           b'"012"', b'"1e3"', b'"-0"', b'"0x0"', b'""', b'"X"', b'"M"', b'"\\u0058"', b'"x\\u0000y"',
           b'"ProfilerStep#' + b"9" * 30 + b'"', b'"ProfilerStep#7"', b'"nccl:all_reduce"',
           b'"record_param_comms"', b'"ncclDevKernel_AllReduce_Sum_f32_RING_LL"', b'"gloo:all_reduce"',
           b'"tracehouse.collective|op=all_reduce|bytes=99999999999999999999999|group_size=0"',
           b'"\\"\\\\\\/\\b\\f\\n\\r\\t"', b'"kernel"', b'"cuda_runtime"', b'"Float"', b'"c10::BFloat16"']
BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80",
            b"\xef\xbf\xbe", b"\xf0\x9f\x98"]
OTHERS = [b"true", b"false", b"null", b"[]", b"{}", b"[1,2]", b"[[1,2],[3]]", b'{"a":1}', b"[[[]]]",
          b"[9223372036854775807,9223372036854775807]", b'["float", "", "Scalar"]', b"[[], [4096, 4096]]"]
EVENT_KEYS = ("ph", "ts", "dur", "pid", "tid", "args", "name", "cat")
ARG_KEYS = ("stream", "correlation", "External id", "external id", "device", "name", "Collective name",
            "In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group Name",
            "Process Group Description", "Seq", "Sequence number", "Input Dims", "Input type",
            "Concrete Inputs", "Fwd thread id", "Device Type", "Device Id", "Addr", "Bytes",
            "Total Allocated", "Total Reserved")
TOP_KEYS = ("baseTimeNanoseconds", "distributedInfo", "deviceProperties", "computeProperties",
            "schemaVersion", "host_name", "hostname", "traceEvents")
INFO_KEYS = ("rank", "world_size", "backend", "pg_config")
COMM_NAMES = ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclKernel_AllGather_RING_LL_Sum_int8_t",
              "record_param_comms", "nccl:all_reduce", "gloo:all_gather", "c10d::allreduce_",
              "tracehouse.collective|op=all_gather|bytes=64|group_size=2|seq=3")
# fmt: on
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"(\s*:)?')  # a string; group 1 set when it is a key
_KEY = re.compile(rb'"(ph|ts|dur|pid|tid|args|name|cat|traceEvents|correlation|stream)"\s*:')


@dataclass(frozen=True)
class Seed:
    name: str
    doc: Any  # the decoded trace (object with traceEvents, or a bare array)


def load_seeds(shared: Path, rng: random.Random) -> list[Seed]:
    """The small traces whole, and slices of the larger ones (start, middle, interesting events)."""
    seeds = [
        Seed(name, json.loads(gzip.decompress((shared / "traces" / name).read_bytes()))) for name in WHOLE
    ]
    for name in SLICED:
        doc = json.loads(gzip.decompress((shared / "traces" / name).read_bytes()))
        events = doc if isinstance(doc, list) else doc["traceEvents"]
        metas = [e for e in events if e.get("ph") == "M"][:50]
        hits = [i for i, e in enumerate(events) if any(w in str(e.get("name")) for w in INTERESTING)]
        for start in (0, rng.randrange(len(events)), hits[len(hits) // 2] if hits else 0):
            window = metas + events[max(0, start - 20) : start + SLICE_EVENTS]
            sliced = window if isinstance(doc, list) else {**doc, "traceEvents": window}
            seeds.append(Seed(f"{name}[{start}:]", sliced))
    return seeds


def raw(rng: random.Random) -> bytes:
    """An odd JSON value's text."""
    pool = rng.choice([NUMBERS, STRINGS, OTHERS, ["nest"], ["long"], ["utf8"]])
    value = rng.choice(pool)
    if value == "nest":
        depth = rng.choice([500, 505, 506, 507, 508, 509, 510, 511, 512, 513, 1000, 100_000])
        if rng.random() < 0.5:
            return b"[" * depth + b"]" * depth
        return b'{"k":' * depth + b"1" + b"}" * depth
    if value == "long":
        unit = rng.choice([b"a", b"\\n", b"\\u00e9", "é".encode(), b"\\ud83d\\ude00"])
        return b'"' + unit * (1_000_000 // len(unit)) + b'"'
    if value == "utf8":
        return b'"a' + rng.choice(BAD_UTF8) + b'b"'
    return value


def _document(seed: Seed, rng: random.Random) -> tuple[Any, list[bytes]]:
    """A copy of the seed with one structural change; raw texts go in as placeholders."""
    doc = json.loads(json.dumps(seed.doc))
    raws: list[bytes] = []

    def placeholder() -> str:
        raws.append(raw(rng))
        return f"@@RAW{len(raws) - 1}@@"

    events = doc if isinstance(doc, list) else doc.get("traceEvents")
    change = rng.choice(
        ["event", "event", "arg", "arg", "comm", "meta", "top", "info", "drop", "dup", "complete", "layout"]
    )
    if not isinstance(events, list) or not events:
        change = "top"
    event = rng.choice(events) if isinstance(events, list) and events else {}
    if change == "event":
        event[rng.choice(EVENT_KEYS)] = placeholder()
    elif change == "arg":
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        args[rng.choice(ARG_KEYS)] = placeholder()
        event["args"] = args
    elif change == "comm":  # a communication event: its args take the scanner's side path
        event.update(
            ph="X", name=rng.choice(COMM_NAMES), cat=rng.choice(["kernel", "cpu_op", "user_annotation"])
        )
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        for key in rng.sample(ARG_KEYS, rng.randint(1, 5)):
            args[key] = (
                placeholder() if rng.random() < 0.5 else rng.choice([1, "Float", [[4, 4]], ["float"], None])
            )
        event["args"] = args
    elif change == "meta":
        meta = {"ph": "M", "name": rng.choice(["thread_name", "process_name"]), "pid": 1, "tid": 1}
        meta[rng.choice(["pid", "tid", "name", "args"])] = placeholder()
        meta.setdefault("args", {"name": placeholder()})
        events.insert(rng.randrange(len(events) + 1), meta)
    elif change == "top" and isinstance(doc, dict):
        doc[rng.choice(TOP_KEYS)] = placeholder()
    elif change == "info" and isinstance(doc, dict):
        info = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
        key = rng.choice(INFO_KEYS)
        info[key] = (
            [{"pg_name": "0", "pg_size": placeholder(), "ranks": [0, placeholder()]}]
            if key == "pg_config"
            else placeholder()
        )
        doc["distributedInfo"] = info
    elif change == "drop":
        event.pop(rng.choice(EVENT_KEYS), None)
    elif change == "dup":
        events.insert(rng.randrange(len(events) + 1), json.loads(json.dumps(event)))
    elif change == "complete":
        event["ph"] = "X"
    elif change == "layout" and isinstance(doc, dict):
        doc = events
    return doc, raws


def structural(seed: Seed, rng: random.Random) -> bytes:
    """The seed with one field set to an odd value, as JSON text."""
    doc, raws = _document(seed, rng)
    text = json.dumps(doc, ensure_ascii=rng.random() < 0.3, separators=rng.choice([(",", ":"), (", ", ": ")]))
    data = text.encode("utf-8", "surrogatepass")
    for i, value in enumerate(raws):
        data = data.replace(f'"@@RAW{i}@@"'.encode(), value)
    return data


def _span(data: bytes, rng: random.Random, most: int = 64) -> tuple[int, int]:
    start = rng.randrange(len(data) + 1)
    return start, min(len(data), start + rng.randint(0, most))


def flip(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if out:
            out[rng.randrange(len(out))] = rng.choice([rng.randrange(256), *b'"{}[],:\\-.eE \n\x00\xff0'])
    return bytes(out)


def truncate(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def splice(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    other = rng.choice(seeds)
    a, b = _span(other, rng, 2000)
    start, end = _span(data, rng, rng.choice([0, 0, 200]))
    return data[:start] + other[a:b] + data[end:]


def repeat(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    start, end = _span(data, rng, 500)
    return data[:end] + data[start:end] * rng.randint(1, 20) + data[end:]


def _pick(pattern: re.Pattern[bytes], data: bytes, rng: random.Random) -> re.Match[bytes] | None:
    """One of the pattern's matches in the text, tokens found from its start (a match is a whole token)."""
    found = [m for m in pattern.finditer(data) if pattern is not _STRING or m.group(1) is None]
    return rng.choice(found) if found else None


def _replace_token(pattern: re.Pattern[bytes], make: Callable[[], bytes]) -> Callable[..., bytes]:
    def mutate(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
        m = _pick(pattern, data, rng)
        if m is None:
            return data
        return data[: m.start()] + make() + data[m.end() :]

    return mutate


def number(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    return _replace_token(_NUMBER, lambda: rng.choice([*NUMBERS, b"[1]", b'"1"', b"true"]))(data, rng, seeds)


def string(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    return _replace_token(_STRING, lambda: raw(rng))(data, rng, seeds)


def bad_utf8(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    def inside(m: re.Match[bytes]) -> bytes:
        text = m.group(0)
        cut = rng.randint(1, len(text) - 1)
        return text[:cut] + rng.choice(BAD_UTF8) + text[cut:]

    m = _pick(_STRING, data, rng)
    return data if m is None else data[: m.start()] + inside(m) + data[m.end() :]


def escape_key(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    m = _pick(_KEY, data, rng)
    if m is None:
        return data
    key = m.group(1)
    i = rng.randrange(len(key))
    escaped = key[:i] + b"\\u%04x" % key[i] + key[i + 1 :]
    return data[: m.start(1)] + escaped + data[m.end(1) :]


def whitespace(data: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice([b" ", b"\n\t\r ", b"\x0b", b"\xc2\xa0", b"\x00", b" " * 5000]) + data[at:]


BYTE_MUTATIONS = (
    flip,
    truncate,
    splice,
    repeat,
    number,
    number,
    string,
    string,
    bad_utf8,
    escape_key,
    whitespace,
)


def gzip_corrupt(data: bytes, rng: random.Random) -> bytes:
    """The text gzipped, often damaged: bytes flipped, cut short, trailing bytes, two members, bad CRC."""
    packed = bytearray(gzip.compress(data, compresslevel=1, mtime=0))
    how = rng.choice(["none", "flip", "cut", "trail", "members", "crc", "raw-deflate"])
    if how == "flip":
        for _ in range(rng.randint(1, 4)):
            packed[rng.randrange(len(packed))] = rng.randrange(256)
    elif how == "cut":
        del packed[rng.randrange(len(packed)) :]
    elif how == "trail":
        packed += rng.choice([b"\x00" * 8, b"garbage", b"\x1f\x8b"])
    elif how == "members":
        packed += gzip.compress(data[: len(data) // 2], mtime=0)
    elif how == "crc":
        packed[-8] ^= 0xFF
    elif how == "raw-deflate":
        packed = bytearray(b"\x1f\x8b" + zlib.compress(data)[2:])
    return bytes(packed)


def make_input(seeds: list[Seed], texts: list[bytes], rng: random.Random) -> tuple[bytes, str]:
    """(input bytes, what was done): 1-3 mutations of one seed, gzipped a fifth of the time."""
    i = rng.randrange(len(seeds))
    done = [seeds[i].name]
    data = texts[i]
    if rng.random() < 0.6:
        data = structural(seeds[i], rng)
        done.append("structural")
    for _ in range(rng.choice([0, 0, 1, 2]) if done[1:] else rng.choice([1, 1, 2, 3])):
        mutation = rng.choice(BYTE_MUTATIONS)
        data = mutation(data, rng, texts)
        done.append(mutation.__name__)
    if rng.random() < 0.2:
        data = gzip_corrupt(data, rng)
        done.append("gzip")
    return data, " ".join(done)


@dataclass
class Report:
    inputs: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    findings: list[str] = field(default_factory=list)

    def line(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.outcomes.items()))
        return f"fuzz: {self.inputs} inputs, {len(self.findings)} findings ({kinds})"


def _judge_and_keep(worker: Worker, data: bytes, what: str, work: Path, out: Path, report: Report) -> None:
    suffix = ".json.gz" if data[:2] == b"\x1f\x8b" else ".json"
    path = work / f"input{suffix}"
    path.write_bytes(data)
    found, kinds = worker.judge(path, INPUT_SECONDS)
    report.inputs += 1
    report.outcomes["/".join(kinds)] += 1
    if found:
        kept = out / f"finding-{len(report.findings):03d}{suffix}"
        shutil.copyfile(path, kept)
        report.findings.append(f"{kept.name}: {found} [{what}]")
        print(f"FINDING {report.findings[-1]}", flush=True)


def fuzz(seconds: float, seed: int, out: Path, env: dict[str, str], *, limit: int | None = None) -> Report:
    """Mutated inputs for `seconds` (or `limit` inputs), each judged by a worker; the report."""
    deadline = time.monotonic() + seconds
    seeds = load_seeds(SHARED_DATA, random.Random(f"{seed}:seeds"))
    texts = [json.dumps(s.doc).encode() for s in seeds]
    report, i = Report(), 0
    with tempfile.TemporaryDirectory(prefix="tracehouse-fuzz-") as work:
        worker = Worker(out / "worker.log", env)
        try:
            for path in sorted((SHARED_DATA / "malformed").glob("*.json")):  # the earlier findings first
                _judge_and_keep(worker, path.read_bytes(), f"malformed/{path.name}", Path(work), out, report)
            while time.monotonic() < deadline and (limit is None or i < limit):
                rng = random.Random(f"{seed}:{i}")
                data, what = make_input(seeds, texts, rng)
                _judge_and_keep(worker, data, f"input {i}: {what}", Path(work), out, report)
                i += 1
        finally:
            worker.close()
    report.findings += _sanitizer_reports(out / "worker.log")
    return report


def real_traces(out: Path, env: dict[str, str]) -> Report:
    """Every shared trace, unmutated, through both decoders."""
    report = Report()
    worker = Worker(out / "worker.log", env)
    try:
        for path in sorted((SHARED_DATA / "traces").glob("*/*.json*")):
            found, kinds = worker.judge(path, 300.0)
            report.inputs += 1
            report.outcomes["/".join(kinds)] += 1
            if found or kinds != ["frames", "frames"]:
                report.findings.append(f"{path.name}: {found or kinds}")
                print(f"FINDING {report.findings[-1]}", flush=True)
    finally:
        worker.close()
    report.findings += _sanitizer_reports(out / "worker.log")
    return report


def _sanitizer_reports(log: Path) -> list[str]:
    """Sanitizer reports in the workers' stderr (each also aborts its worker)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    lines = [
        line for line in text.splitlines() if "runtime error:" in line or "ERROR: AddressSanitizer" in line
    ]
    return [f"sanitizer: {line.strip()[:300]}" for line in lines]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get(SECONDS_VARIABLE, "120")))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--inputs", type=int, default=None, help="stop after this many inputs")
    parser.add_argument(
        "--out", type=Path, default=None, help="where findings are kept (default: a temp dir)"
    )
    parser.add_argument("--scanner", choices=["installed", "sanitized", "portable"], default="installed")
    parser.add_argument("--real-traces", action="store_true", help="the shared traces, unmutated")
    args = parser.parse_args(argv)
    if not (SHARED_DATA / "traces").is_dir():
        print(f"fuzz: {SHARED_DATA}/traces is absent: nothing to mutate", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="tracehouse-fuzz-out-"))
    out.mkdir(parents=True, exist_ok=True)
    env: dict[str, str] = {}
    if args.scanner != "installed":
        so = build_scanner(args.scanner, out / f"scanner-{args.scanner}")
        env = {SCANNER_SO_VARIABLE: str(so), **(sanitizer_env() if args.scanner == "sanitized" else {})}
    started = time.monotonic()
    report = (
        real_traces(out, env)
        if args.real_traces
        else fuzz(args.seconds, args.seed, out, env, limit=args.inputs)
    )
    print(
        f"{report.line()} in {time.monotonic() - started:.0f} s; scanner {args.scanner}; inputs kept in {out}"
    )
    for finding in report.findings:
        print(f"  {finding}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
