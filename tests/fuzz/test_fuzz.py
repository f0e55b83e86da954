"""The mutation fuzz run (TRACEHOUSE_FUZZ_SECONDS, default 20 s here) and the oracle's own checks."""

from __future__ import annotations

import gzip
import os
import random
from collections.abc import Iterator
from pathlib import Path

import mutate
import pytest
from oracle import PARSE_VARIABLE, Worker
from support.testdata import SHARED_DATA, shared_path
from support.tracebuilder import cpu_op, thread_name, write_trace

pytestmark = pytest.mark.fuzz


def test_mutated_real_traces_keep_the_contract(tmp_path: Path) -> None:
    shared_path("traces")
    seconds = float(os.environ.get(mutate.SECONDS_VARIABLE, "20"))
    report = mutate.fuzz(seconds, 0, tmp_path, {})
    print(report.line())
    malformed = len(list((SHARED_DATA / "malformed").glob("*.json")))
    assert report.inputs > malformed, report.line()
    assert report.outcomes["frames/frames"] and report.outcomes["error/error"], report.line()
    assert report.findings == [], "\n".join(report.findings)


@pytest.fixture(scope="module")
def planted_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    worker = Worker(tmp_path_factory.mktemp("planted") / "worker.log", {PARSE_VARIABLE: "planted:parse"})
    yield worker
    worker.close()


@pytest.mark.parametrize(
    ("fault", "finding"),
    [
        ("fine", None),
        ("keyerror", "scanner path: KeyError at planted.py"),
        ("hang", "no answer within 3 s (hang)"),
        ("crash", "the worker died (exit -6"),
        ("unnamed", "error is not one line naming the file"),
        ("differ", "frames differ: threads"),
        ("oneside", "decoders disagree: scanner error"),
    ],
)
def test_the_oracle_reports_each_breach(
    tmp_path: Path, planted_worker: Worker, fault: str, finding: str
) -> None:
    path = write_trace(tmp_path / f"{fault}.json", [cpu_op("a", 1, 2), thread_name(1, 1, "main")])
    found, _ = planted_worker.judge(path, 3.0)
    if finding is None:
        assert found is None
    else:
        assert found is not None and finding in found, found


@pytest.fixture(scope="module")
def seeds() -> tuple[list[mutate.Seed], list[bytes]]:
    shared_path("traces")
    loaded = mutate.load_seeds(SHARED_DATA, random.Random("0:seeds"))
    return loaded, [mutate.json.dumps(s.doc).encode() for s in loaded]


def test_inputs_depend_on_the_seed_only(seeds: tuple[list[mutate.Seed], list[bytes]]) -> None:
    loaded, texts = seeds
    assert [s.name for s in loaded] == [
        s.name for s in mutate.load_seeds(SHARED_DATA, random.Random("0:seeds"))
    ]
    first = [mutate.make_input(loaded, texts, random.Random(f"0:{i}")) for i in range(20)]
    assert first == [mutate.make_input(loaded, texts, random.Random(f"0:{i}")) for i in range(20)]
    assert len({data for data, _ in first}) == 20


def test_the_mutations_reach_what_the_brief_names(seeds: tuple[list[mutate.Seed], list[bytes]]) -> None:
    loaded, texts = seeds
    seen = {
        key: 0 for key in ("gzip", "deep", "long", "utf8", "surrogate", "huge", "exponent", "escaped", "cut")
    }
    for i in range(700):
        data, what = mutate.make_input(loaded, texts, random.Random(f"1:{i}"))
        if data[:2] == b"\x1f\x8b":
            seen["gzip"] += 1
            try:
                data = gzip.decompress(data)
            except Exception:
                continue
        seen["deep"] += b"[" * 100_000 in data or b'{"k":' * 1000 in data
        seen["long"] += len(data) > 1_000_000
        seen["utf8"] += any(bad in data for bad in mutate.BAD_UTF8[:2])
        seen["surrogate"] += b"\\ud800" in data or b"\\udc00" in data
        seen["huge"] += b"1" * 4301 in data or b"1e400" in data
        seen["exponent"] += b"1.5e3" in data
        seen["escaped"] += b'"\\u00' in data
        seen["cut"] += "truncate" in what
    assert all(seen.values()), seen


def test_the_driver_runs_as_a_script(tmp_path: Path) -> None:
    shared_path("traces")
    assert mutate.main(["--seconds", "2", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "worker.log").exists()
