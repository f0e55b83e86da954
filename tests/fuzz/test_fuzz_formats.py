"""A short mutation fuzz run of nccl-tests, power logs and manifests (TRACEHOUSE_FUZZ_SECONDS, default 8 s)
and the format oracle's own checks."""

from __future__ import annotations

import os
import random
from pathlib import Path

import mutate_formats
import polars as pl
import pytest
from format_oracle import _power_problem, judge
from support.testdata import SHARED_DATA, shared_path
from tracehouse.pipeline.parsers.power.parse import PowerLog
from tracehouse.pipeline.warehouse.schema import POWER_SAMPLES

pytestmark = pytest.mark.fuzz


def test_mutated_inputs_of_every_format_keep_the_contract(tmp_path: Path) -> None:
    shared_path("nccl-tests")
    seconds = float(os.environ.get(mutate_formats.SECONDS_VARIABLE, "8"))
    report = mutate_formats.fuzz(seconds, 0, tmp_path)
    print(report.line())
    for kind in mutate_formats.FORMATS:
        assert report.outcomes[f"{kind}/accepted"] and report.outcomes[f"{kind}/error"], report.line()
    assert report.findings == [], "\n".join(report.findings)


def test_inputs_depend_on_the_seed_only() -> None:
    shared_path("power")
    seeds = mutate_formats.load_seeds(SHARED_DATA)
    for kind in mutate_formats.FORMATS:
        first = [mutate_formats.make_input(seeds, kind, random.Random(f"0:{i}")) for i in range(10)]
        assert first == [mutate_formats.make_input(seeds, kind, random.Random(f"0:{i}")) for i in range(10)]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "x.power.log",
            "timestamp, index, power.draw [W]\n2026/07/14 08:12:53.353, 0, 250 W\n",
            ("accepted", None),
        ),
        (
            "x.power.log",
            "timestamp, index, power.draw [W]\n2026/07/14 08:12:53.353, 0, hot\n",
            ("error", None),
        ),
        ("x.nccl.txt", "# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n#\n", ("error", None)),
        ("manifest.json", '{"study": "s", "run_id": "r", "flops_per_token": 1e400}', ("error", None)),
        ("manifest.json", '{"study": "s", "run_id": "r"}', ("accepted", None)),
    ],
)
def test_the_oracle_judges_each_format(tmp_path: Path, name: str, text: str, expected: tuple) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert judge(path) == expected


@pytest.mark.parametrize(
    ("column", "value", "finding"),
    [
        ("power_w", float("inf"), "accepted power_w = inf, outside [0, 5000]"),
        ("power_w", -1.0, "accepted power_w = -1.0, outside [0, 5000]"),
        ("ts_unix_ns", -5, "accepted ts_unix_ns = -5, outside [0, 9.22337e+18]"),
        ("energy_counter_j", float("nan"), "accepted energy_counter_j = nan, outside [0, 9.22337e+15]"),
    ],
)
def test_the_oracle_names_a_value_out_of_range(column: str, value: float, finding: str) -> None:
    row = {
        "host": "h",
        "device": 0,
        "ts_unix_ns": 1,
        "power_w": 1.0,
        "source": "nvml",
        "clock": "c",
        column: value,
    }
    frame = pl.DataFrame([row]).select(
        [pl.col(n).cast(t) if n in row else pl.lit(None, t).alias(n) for n, t in POWER_SAMPLES.items()]
    )
    assert _power_problem(Path("x.power.log"), PowerLog(frame=frame, dropped=())) == finding
    doubled = PowerLog(
        frame=pl.concat([frame, frame]).with_columns(pl.lit(1).cast(POWER_SAMPLES[column]).alias(column)),
        dropped=(),
    )
    assert _power_problem(Path("x.power.log"), doubled) == "accepted a repeated sample"


def test_the_driver_runs_as_a_script(tmp_path: Path) -> None:
    shared_path("power")
    assert mutate_formats.main(["--seconds", "1", "--inputs", "6", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "worker.log").exists()
