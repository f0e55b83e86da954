"""`tracehouse project`: stored rows, replacement per scenario, JSON, and one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from tracehouse.pipeline.cli.main import main

SIZES = "2,4,8,64,2048"


@pytest.fixture
def warehouse(sample_warehouse: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "wh"
    shutil.copytree(sample_warehouse, copy)
    return copy


def _rows(warehouse: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_project_stores_one_row_per_run_and_world_size_and_replaces_them(warehouse: Path, capsys) -> None:
    args = ["project", "--warehouse", str(warehouse), "--study", "tiny-cpu-gloo", "--world-sizes", SIZES]
    assert main([*args, "--run", "ddp-ws2"]) == 0
    out = capsys.readouterr().out
    assert "tiny-cpu-gloo/ddp-ws2 (measured at 2 device(s)): replay of the measured steps within" in out
    rows = _rows(
        warehouse, "SELECT scenario, world_size, knee, knee_note FROM projections ORDER BY world_size"
    )
    assert [r[1] for r in rows] == [2, 4, 8, 64, 2048]
    assert {r[0] for r in rows} == {"baseline"}
    assert sum(r[2] for r in rows) <= 1  # one knee at most
    (note,) = {r[3] for r in rows}
    assert f"  {note}\n" in out
    assert main([*args, "--run", "ddp-ws2"]) == 0  # again: replaced, not added
    assert _rows(warehouse, "SELECT count(*) FROM projections")[0][0] == 5
    assert main([*args, "--run", "ddp-ws2", "--compute-speedup", "2", "--ideal-network"]) == 0
    scenarios = _rows(warehouse, "SELECT scenario, count(*) FROM projections GROUP BY 1 ORDER BY 1")
    assert scenarios == [("baseline", 5), ("compute-x2+ideal-network", 5)]
    faster = dict(
        _rows(warehouse, "SELECT world_size, step_time_us FROM projections WHERE scenario <> 'baseline'")
    )
    slower = dict(
        _rows(warehouse, "SELECT world_size, step_time_us FROM projections WHERE scenario = 'baseline'")
    )
    assert all(faster[w] < slower[w] for w in faster)


def test_project_every_run_of_the_study_as_json(warehouse: Path, capsys) -> None:
    code = main(
        ["project", "--warehouse", str(warehouse), "--study", "tiny-cpu-gloo", "--world-sizes", "8", "--json"]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result) == 9
    for run in result:
        assert run["identity"]["max_error"] <= 0.05
        sizes = [p["world_size"] for p in run["points"]] + [r["world_size"] for r in run["refused"]]
        assert sorted(sizes) == sorted({8, int(run["points"][0]["measured_world_size"])})
    stored = _rows(warehouse, "SELECT count(DISTINCT run_id), count(*) FROM projections")[0]
    assert stored[0] == 9


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--run", "fsdp_tp-ws4-tp2", "--world-sizes", "7"],
            "world size 7 is not a multiple of the run's tp x pp = 2",
        ),
        (["--run", "nope", "--world-sizes", "4"], "no run tiny-cpu-gloo/nope in the warehouse"),
        (["--world-sizes", "4", "--network", "/nonexistent.toml"], "no such network file"),
        (["--world-sizes", "4", "--compute-speedup", "0"], "compute-speedup must be > 0"),
    ],
)
def test_project_errors_are_one_line(warehouse: Path, capsys, extra: list[str], message: str) -> None:
    code = main(["project", "--warehouse", str(warehouse), "--study", "tiny-cpu-gloo", *extra])
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after any progress line
    assert code == 2 and last.startswith("tracehouse project: error: ") and message in last, last


def test_world_sizes_must_be_positive_integers(warehouse: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["project", "--warehouse", str(warehouse), "--study", "tiny-cpu-gloo", "--world-sizes", "4,x"])
    assert "not a comma-separated list of integers" in capsys.readouterr().err


def test_the_python_api_projects_like_the_command(warehouse: Path) -> None:
    import tracehouse

    results = tracehouse.project(
        warehouse,
        study="tiny-cpu-gloo",
        run="fsdp-ws2",
        world_sizes=[4, 8],
        ideal_network=True,
        scenario="ideal",
    )
    (result,) = results
    assert [p.world_size for p in result.points] == [2, 4, 8]
    stored = _rows(
        warehouse, "SELECT world_size, step_time_us FROM projections WHERE scenario = 'ideal' ORDER BY 1"
    )
    assert stored == [(p.world_size, p.step_time_us) for p in result.points]
    assert all(p.exposed_comm_frac < 0.5 for p in result.points)
    assert type(results).__name__ == "Projections" and results.failed == {}
