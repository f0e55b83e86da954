"""Run facts stated at ingest (no manifest) are enough to plan a world-size-1 FSDP run's collectives.

Without them the projection refuses (test_projection_unknowns); with `--strategy fsdp --model tiny`
(a reference size gives its parameters and FSDP units) it plans the all-gathers and
reduce-scatters, and the exposed communication it projects at world size 2 is near the measured
2-rank run's (the same workload, its traces ingested without their manifest too): in time per
step, not as a share of it, since the projected step lacks the compute two ranks slow down on two
cores, which a one-rank trace cannot show (docs/projection.md, "Validation"); within a factor 1.5,
short of it, since the one-rank trace lacks FSDP's copy-out after each all-gather too ("Limits").
"""

from __future__ import annotations

import shutil

import duckdb
from support.testdata import SAMPLE_TRACES
from tracehouse.pipeline.cli.main import main

FACTS = ["--strategy", "fsdp", "--model", "tiny", "--dtype", "fp32", "--global-batch", "8", "--seq-len", "64"]


def test_stated_facts_plan_the_fsdp_collectives_of_a_one_rank_run(tmp_path, capsys):
    for run, ranks in (("one", 1), ("two", 2)):
        for rank in range(ranks):
            source = SAMPLE_TRACES / "tiny-cpu-gloo" / f"fsdp-ws{ranks}" / f"rank{rank}.pt.trace.json.gz"
            (tmp_path / run).mkdir(exist_ok=True)
            shutil.copy(source, tmp_path / run / source.name)  # no manifest beside them
    wh = tmp_path / "wh"
    assert (
        main(
            [
                "ingest",
                str(tmp_path / "one"),
                str(tmp_path / "two"),
                "--warehouse",
                str(wh),
                "--study",
                "x",
                *FACTS,
            ]
        )
        == 0
    )
    assert (
        main(["project", "--warehouse", str(wh), "--study", "x", "--run", "rank0", "--world-sizes", "2"]) == 0
    )
    capsys.readouterr()
    with duckdb.connect(str(wh / "tracehouse.duckdb"), read_only=True) as c:
        projected = c.sql(
            "SELECT exposed_comm_frac * step_time_us, notes FROM projections WHERE world_size = 2"
        ).fetchall()
        measured = c.sql(
            "SELECT exposed_comm_frac * step_time_us, exposed_comm_frac FROM scale_points "
            "WHERE run_id = 'two'"
        ).fetchall()
    [(exposed_us, notes)] = projected
    # nothing refused; without a manifest the node's capacity is assumed, and said
    assert notes.startswith("nodes assumed to hold 8 devices: no manifest of the study records node_devices")
    [(measured_us, measured_frac)] = measured
    assert measured_frac > 0.1 and measured_us / 1.5 < exposed_us <= measured_us
