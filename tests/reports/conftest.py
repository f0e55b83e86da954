"""Warehouses for the report tests: fabricated ones (always), and one ingested from sample_traces/."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import shutil
from pathlib import Path

import pytest
from support import devwarehouse
from support.hostile import HOSTILE, hostile_run
from support.testdata import sample_runs, shared_path
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.ingest.driver import ingest


@pytest.fixture(scope="session")
def dev_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fabricated warehouse with power captured."""
    return devwarehouse.build(tmp_path_factory.mktemp("dev-warehouse"))


@pytest.fixture(scope="session")
def dev_warehouse_no_power(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fabricated warehouse of a study whose manifests say why no power was captured."""
    return devwarehouse.build(tmp_path_factory.mktemp("dev-warehouse-no-power"), power=False)


@pytest.fixture(scope="session")
def hostile_dev_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fabricated warehouse with markup in its study, host, kernel and file names."""
    names = devwarehouse.Names(
        study=HOSTILE["study"], host=HOSTILE["host"], kernel=HOSTILE["kernel"], error_path=HOSTILE["run_id"]
    )
    return devwarehouse.build(tmp_path_factory.mktemp("dev-warehouse-hostile"), names=names)


@pytest.fixture(scope="session")
def hostile_real_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real warehouse ingested from the hostile run."""
    root = tmp_path_factory.mktemp("hostile-real")
    summary = ingest([hostile_run(root / "run")], root / "warehouse")
    assert summary.failed == [], summary.failed
    return root / "warehouse"


@pytest.fixture(scope="session")
def showcase_warehouse(request: pytest.FixtureRequest) -> Path:
    """The warehouse the README screenshot shows: sample_traces/ when present, else the fabricated one."""
    if sample_runs():
        return request.getfixturevalue("sample_warehouse")
    return request.getfixturevalue("dev_warehouse")


# Traces without a manifest, each its own one-device run of one study: unrelated workloads that
# a report must never add up (small files of ../shared/data).
UNRELATED = ("tracelens/h100_bert_small", "tracelens/mi210_gpu_only", "tracelens/mi300_sglang_decode")
UNRELATED_STUDY = "unrelated"
REPEAT_OF, REPEAT = "ddp-ws2", "ddp-ws2-repeat"


def repeat_run(source: Path, target: Path, run_id: str) -> Path:
    """A copy of a sample run under another run_id, its traces re-encoded (another content hash)."""
    shutil.copytree(source, target)
    manifest = json.loads((target / "manifest.json").read_text())
    (target / "manifest.json").write_text(json.dumps({**manifest, "run_id": run_id}))
    for trace in target.glob("*.json.gz"):
        # the same events with one trailing space: a second measurement of identical steps
        trace.write_bytes(gzip.compress(gzip.decompress(trace.read_bytes()) + b" "))
    return target


@pytest.fixture(scope="session")
def grain_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample study (projected) plus a repeat of one run, and a study of unrelated one-device runs."""
    runs = sample_runs()
    if not runs:
        pytest.skip("sample_traces/ holds no run yet (the collectors write them)")
    root = tmp_path_factory.mktemp("grain")
    source = next(r for r in runs if r.name == REPEAT_OF)
    summary = ingest([*runs, repeat_run(source, root / REPEAT, REPEAT)], root / "warehouse")
    assert summary.failed == [], summary.failed
    for name in UNRELATED:
        path = shared_path(f"traces/{name}.json.gz")
        run = Path(name).name
        summary = ingest([path], root / "warehouse", study=UNRELATED_STUDY, run=run, ranks={path.name: 0})
        assert summary.failed == [], summary.failed
    argv = [
        "project",
        "--warehouse",
        str(root / "warehouse"),
        "--study",
        "tiny-cpu-gloo",
        "--world-sizes",
        "8,64,512",
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    return root / "warehouse"
