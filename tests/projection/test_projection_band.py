"""How far to trust a projection (docs/projection.md): the band's rule on hand-made checks, the
checks a projection makes against the study's measured runs, the band each stored point carries,
and the checks forgotten with either run they rest on."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.wh_helpers import query
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.projection.band import DEFAULT_BASIS, DEFAULT_RATE, Check, study_band

STUDY = "tiny-cpu-gloo"


def check(run: str, ws: int, to: int, projected: float, measured: float) -> Check:
    return Check(STUDY, run, ws, to, f"{run}-at-{to}", projected, measured)


def test_the_rate_is_the_worst_check_per_doubling_and_the_band_grows_with_the_distance():
    checks = [
        check("a", 1, 2, 90.0, 100.0),  # ln 0.9 over 1 doubling
        check("a", 1, 8, 200.0, 100.0),  # ln 2 over 3 doublings: 0.231 per doubling
        check("b", 4, 2, 50.0, 60.0),  # ln(5/6) over 1 doubling: 0.182
    ]
    band = study_band(checks)
    assert band.rate == pytest.approx(math.log(2) / 3)
    assert band.basis.startswith("study: 3 check(s) of 2 run(s)")
    assert band.summary()["worst"] == {
        "run": "a",
        "from": 1,
        "to": 8,
        "measured_run": "a-at-8",
        "error": pytest.approx(math.log(2)),
    }
    # 4 doublings from the measured size, the replay 1 % off: exp(0.01 + 4 x rate)
    assert band.factor(64, 4, 0.01) == pytest.approx(math.exp(0.01 + 4 * math.log(2) / 3))
    assert band.factor(4, 4, 0.01) == pytest.approx(math.exp(0.01))  # the measured size: the replay's alone
    assert band.factor(1, 4, 0.0) == band.factor(16, 4, 0.0)  # down as far as up


def test_a_study_without_checks_takes_the_validation_default_and_says_so():
    band = study_band([check("a", 2, 2, 90.0, 100.0), check("a", 1, 2, 0.0, 100.0)])  # unusable
    assert (band.rate, band.basis, band.checks) == (DEFAULT_RATE, DEFAULT_BASIS, ())
    assert band.summary()["worst"] is None
    assert math.log(21.59 / 16.10) == pytest.approx(DEFAULT_RATE, abs=1e-3)  # docs/projection.md, Validation


@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 4, 8, 16]),
            st.sampled_from([1, 2, 4, 8, 16]),
            st.floats(1.0, 1e6),
            st.floats(1.0, 1e6),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_every_check_lies_inside_the_band_it_sets(rows):
    """The band is a bound: each check's measured step lies within the band its own projection gets."""
    checks = [check("r", ws, to, p, m) for ws, to, p, m in rows]
    band = study_band(checks)
    for c in band.checks:
        f = band.factor(c.check_world_size, c.world_size, 0.0)
        assert c.projected_step_time_us / f <= c.measured_step_time_us * (1 + 1e-9)
        assert c.measured_step_time_us <= c.projected_step_time_us * f * (1 + 1e-9)


def _project(warehouse: Path, *args: str) -> None:
    common = ["project", "--warehouse", str(warehouse), "--study", STUDY]
    assert main([*common, *args]) == 0


@pytest.fixture(scope="module")
def projected(sample_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("band") / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    _project(warehouse, "--world-sizes", "2,64")
    return warehouse


def test_each_run_is_checked_against_every_measured_run_of_its_workload(projected: Path):
    checks = query(
        projected,
        "SELECT run_id, world_size, check_world_size, measured_run_id FROM projection_checks ORDER BY ALL",
    )
    # ddp and fsdp measured at 1, 2 and 4 ranks (512 tokens a step each; fsdp-ws1's FSDP units from its
    # manifest's model_config); tp, pp and fsdp_tp have no other run of their workload
    assert checks == [
        ("ddp-ws1", 1, 2, "ddp-ws2"),
        ("ddp-ws1", 1, 4, "ddp-ws4"),
        ("ddp-ws2", 2, 1, "ddp-ws1"),
        ("ddp-ws2", 2, 4, "ddp-ws4"),
        ("ddp-ws4", 4, 1, "ddp-ws1"),
        ("ddp-ws4", 4, 2, "ddp-ws2"),
        ("fsdp-ws1", 1, 2, "fsdp-ws2"),
        ("fsdp-ws1", 1, 4, "fsdp-ws4"),
        ("fsdp-ws2", 2, 1, "fsdp-ws1"),
        ("fsdp-ws2", 2, 4, "fsdp-ws4"),
        ("fsdp-ws4", 4, 1, "fsdp-ws1"),
        ("fsdp-ws4", 4, 2, "fsdp-ws2"),
    ]
    # a check at a requested world size is that point's projection, beside that run's measured step
    same = query(
        projected,
        """SELECT c.projected_step_time_us, p.step_time_us, c.measured_step_time_us, s.step_time_us
           FROM projection_checks c
           JOIN projections p ON p.run_id = c.run_id AND p.world_size = c.check_world_size
           JOIN scale_points s ON s.run_id = c.measured_run_id
           WHERE c.check_world_size = 2""",
    )
    assert len(same) == 4 and all(a == pytest.approx(b) and m == s for a, b, m, s in same)


def test_every_point_carries_the_band_the_study_s_checks_set(projected: Path):
    (rate,) = query(projected, "SELECT max(abs(log_error) / doublings) FROM projection_checks")[0]
    rows = query(
        projected,
        """SELECT run_id, world_size, measured_world_size, step_time_us, step_time_low_us,
                  step_time_high_us, provenance FROM projections""",
    )
    assert rows
    for run, ws, measured_ws, step, low, high, text in rows:
        rests_on = json.loads(text)
        band = rests_on["band"]
        assert band["rate_per_doubling"] == pytest.approx(rate) and band["checks"] == 12, run
        factor = math.exp(rests_on["replay"]["max_error"] + rate * abs(math.log2(ws / measured_ws)))
        assert (low, high) == (pytest.approx(step / factor), pytest.approx(step * factor)), (run, ws)


def test_a_what_if_is_checked_without_its_what_if_and_a_later_run_keeps_the_study_s_band(
    projected: Path, tmp_path: Path
):
    warehouse = tmp_path / "wh"
    shutil.copytree(projected, warehouse)
    before = query(warehouse, "SELECT * EXCLUDE (checked_at) FROM projection_checks ORDER BY ALL")
    _project(warehouse, "--world-sizes", "2,64", "--run", "ddp-ws1", "--compute-speedup", "2")
    after = query(warehouse, "SELECT * EXCLUDE (checked_at) FROM projection_checks ORDER BY ALL")
    assert after == before  # the checks replay the measurable scenario: compute x2 is no measurement
    rows = query(
        warehouse,
        "SELECT provenance FROM projections WHERE run_id = 'ddp-ws1' AND scenario = 'compute-x2'",
    )
    assert rows and all(json.loads(text)["band"]["checks"] == 12 for (text,) in rows)  # every run's checks


def test_forgetting_a_run_drops_every_check_it_is_part_of(projected: Path, tmp_path: Path):
    warehouse = tmp_path / "wh"
    shutil.copytree(projected, warehouse)
    assert main(["forget", "ddp-ws4", "--warehouse", str(warehouse), "--study", STUDY]) == 0
    left = query(warehouse, "SELECT run_id, measured_run_id FROM projection_checks ORDER BY ALL")
    assert len(left) == 8 and all("ddp-ws4" not in pair for pair in left)


def test_the_command_prints_each_point_s_band_and_what_it_rests_on(projected: Path, tmp_path: Path, capsys):
    warehouse = tmp_path / "wh"
    shutil.copytree(projected, warehouse)
    capsys.readouterr()
    _project(warehouse, "--world-sizes", "8", "--run", "ddp-ws2")
    out = capsys.readouterr().out
    ((step, high, text),) = query(
        warehouse,
        "SELECT step_time_us, step_time_high_us, provenance FROM projections "
        "WHERE run_id = 'ddp-ws2' AND world_size = 8",
    )
    (row,) = [line for line in out.splitlines() if line.split()[:1] == ["8"]]
    assert f"x{high / step:.3g}" in row.split()
    band = json.loads(text)["band"]
    worst = band["worst"]
    assert (
        f"  band: the step time within a factor exp(replay error + {band['rate_per_doubling']:.3g} per "
        f"doubling from the measured world size); {band['basis']}; worst: {worst['run']} from "
        f"{worst['from']} to {worst['to']} device(s) against {worst['measured_run']}, "
        f"{100 * math.expm1(worst['error']):+.1f} %"
    ) in out.splitlines()
