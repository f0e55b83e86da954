"""A projection says what it does not know (docs/projection.md "What a projection refuses"): no
knee without throughput, no data-parallel scaling of a run whose data-parallel collectives are
neither measured nor planned, a flag on points with less than one sequence per data-parallel rank,
every run of a study projected that can be, the measured points beside the projected ones, and the
results shown as tables in a notebook."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pytest
import tracehouse
from support.testdata import SAMPLE_TRACES, shared_path
from tracehouse.collectors.model_sizes import fsdp_unit_params, get_model_config
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.projection.build import build_run_graph
from tracehouse.pipeline.projection.timeline import load_run
from tracehouse.pipeline.warehouse.reading import open_reader

STUDY = "tiny-cpu-gloo"
NO_THROUGHPUT = "knee unknown: no throughput, the run has no tokens per step"
GAP = "one data-parallel rank measured, no data-parallel collective to scale, none can be planned"


@pytest.fixture
def warehouse(sample_warehouse: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "wh"
    shutil.copytree(sample_warehouse, copy)
    return copy


@pytest.fixture(scope="module")
def lone_fsdp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample fsdp-ws1 trace ingested alone, without its manifest (study x, run fsdp1)."""
    from tracehouse.pipeline.ingest.driver import ingest

    folder = tmp_path_factory.mktemp("lone") / "fsdp1"
    folder.mkdir()
    shutil.copy(SAMPLE_TRACES / STUDY / "fsdp-ws1" / "rank0.pt.trace.json.gz", folder)
    target = tmp_path_factory.mktemp("lone-warehouse")
    assert ingest([folder], target, study="x", run="fsdp1").failed == []
    return target


def _rows(warehouse: Path, sql: str, params: list | None = None) -> list[tuple]:
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def _project(warehouse: Path, study: str, *argv: str, capsys) -> tuple[int, str, str]:
    code = main(["project", "--warehouse", str(warehouse), "--study", study, *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_fsdp_on_one_device_without_a_manifest_is_not_scaled_and_says_why(lone_fsdp: Path, capsys) -> None:
    code, out, _ = _project(lone_fsdp, "x", "--world-sizes", "2,8", capsys=capsys)
    assert code == 0
    # Only the measured point is stored: projecting it would claim 0 % communication at 2 devices.
    rows = _rows(lone_fsdp, "SELECT world_size, exposed_comm_frac, notes, knee, knee_note FROM projections")
    assert [(r[0], r[1], r[3]) for r in rows] == [(1, 0.0, False)]
    notes, knee_note = rows[0][2], rows[0][4]
    assert notes.startswith(
        "not projected at 2, 8: one data-parallel rank measured, no data-parallel collective"
    )
    assert "no manifest gives the run's strategy with n_params (ddp) or fsdp_units (fsdp) and dtype" in notes
    assert "its trace shows FSDP hooks (FSDP::*); state them in a manifest.json beside the trace" in notes
    assert "\n" not in notes
    assert knee_note.startswith(NO_THROUGHPUT)
    assert f"  note: {notes}\n" in out and f"  {knee_note}\n" in out
    assert "every added device" not in out  # no knee claim without throughput
    assert "         2  not projected (see below)\n" in out


def test_a_one_gpu_public_trace_has_no_knee_claim_and_no_data_parallel_scaling(
    tmp_path: Path, capsys
) -> None:
    from tracehouse.pipeline.ingest.driver import ingest

    trace = shared_path("traces/tracelens/h100_bert_small.json.gz")
    assert ingest([trace], tmp_path, study="pub", run="bert", ranks={str(trace): 0}).failed == []
    code, out, _ = _project(tmp_path, "pub", "--world-sizes", "2,8,64", capsys=capsys)
    assert code == 0
    (row,) = _rows(tmp_path, "SELECT world_size, tokens_per_s, knee, knee_note, notes FROM projections")
    assert row[:3] == (1, None, False)
    assert row[3].startswith(NO_THROUGHPUT)
    assert row[4].startswith("not projected at 2, 8, 64:") and "not yet from GPU traces" in row[4]
    assert "knee: none" not in out and "every added device" not in out


def test_fsdp_on_one_device_is_scaled_once_its_units_are_known(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse / "tracehouse.duckdb")) as con:  # no reference model either
        con.execute("UPDATE run_manifests SET model_config = NULL WHERE run_id = 'fsdp-ws1'")
    (without,) = tracehouse.project(warehouse, study=STUDY, run="fsdp-ws1", world_sizes=[2])
    assert [p.world_size for p in without.points] == [1]
    assert "its manifest records no fsdp_units" in without.refused[2]
    assert without.knee_note == "knee unknown: no world size above the measured one was projected"
    units = fsdp_unit_params(get_model_config("tiny"))
    with duckdb.connect(str(warehouse / "tracehouse.duckdb")) as con:
        con.execute("UPDATE run_manifests SET fsdp_units = ? WHERE run_id = 'fsdp-ws1'", [json.dumps(units)])
    (planned,) = tracehouse.project(warehouse, study=STUDY, run="fsdp-ws1", world_sizes=[2])
    assert planned.refused == {}
    # the sample manifests predate node_devices: the capacity placing the 2 devices is assumed
    assert [note.split(":")[0] for note in planned.notes] == ["nodes assumed to hold 4 devices"]
    at_two = planned.points[-1]
    assert at_two.world_size == 2 and at_two.notes == planned.notes[0]
    assert at_two.exposed_comm_frac > 0 and at_two.exposed_comm_dp_frac == at_two.exposed_comm_frac


def test_runs_measured_on_one_data_parallel_rank_scale_only_where_collectives_are_planned(
    warehouse: Path,
) -> None:
    results = tracehouse.project(warehouse, study=STUDY, world_sizes=[8])
    # fsdp-ws1: units from its model_config; tp-ws2: DDP's; pp-ws2: each stage's, at its last micro-batch
    assert {r.facts.run_id: r.refused for r in results if r.refused} == {}
    for run_id in ("ddp-ws1", "tp-ws2", "pp-ws2"):  # the buckets are planned
        run = next(r for r in results if r.facts.run_id == run_id)
        assert [p.world_size for p in run.points] == [run.facts.world_size, 8]
        assert run.points[1].exposed_comm_dp_frac > 0


def test_a_tensor_parallel_runs_planned_all_reduces_join_its_data_parallel_group(warehouse: Path) -> None:
    # tp-ws2 (dp=1, tp=2): ranks 0 and 1 hold the two halves of each layer, each its own data-parallel group
    with open_reader(warehouse) as connection:
        timeline = load_run(connection, STUDY, "tp-ws2")
    run = build_run_graph(timeline)
    planned = {key: i for key, i in run.instances.key_index.items() if key[0] == "synthetic"}
    assert planned
    members = {key[1]: set() for key in planned}
    bytes_per_step: dict[tuple[int, int], int] = {}
    for key, i in planned.items():
        members[key[1]] |= {rank for rank, _, _ in run.instances.members[i]}
        group_step = (key[1], key[3])  # ("synthetic", group, "ddp", step, bucket)
        bytes_per_step[group_step] = bytes_per_step.get(group_step, 0) + run.instances.bytes[i]
    assert members == {0: {0}, 1: {1}}
    # each step's buckets hold the gradients of the rank's half of the parameters, in fp32
    assert set(bytes_per_step.values()) == {timeline.facts.n_params // 2 * 4}


@pytest.mark.parametrize(
    ("run_id", "flagged", "clean"),
    [("ddp-ws2", 16, 8), ("fsdp_tp-ws4-tp2", 32, 16)],  # 8 sequences: at most 8 data-parallel ranks
)
def test_less_than_one_sequence_per_data_parallel_rank_is_flagged(
    warehouse: Path, capsys, run_id: str, flagged: int, clean: int
) -> None:
    sizes = f"{clean},{flagged}"
    assert _project(warehouse, STUDY, "--run", run_id, "--world-sizes", sizes, capsys=capsys)[0] == 0
    flags = dict(_rows(warehouse, "SELECT world_size, flag FROM projections WHERE run_id = ?", [run_id]))
    assert flags[clean] is None
    assert flags[flagged] == (
        "a global batch of 8 sequence(s) is less than one per data-parallel rank: no runnable "
        "configuration under strong scaling (--weak-scaling keeps the batch per device)"
    )
    # Weak scaling keeps the batch per device: nothing to flag.
    argv = ["--run", run_id, "--world-sizes", sizes, "--weak-scaling"]
    assert _project(warehouse, STUDY, *argv, capsys=capsys)[0] == 0
    weak = _rows(warehouse, "SELECT flag FROM projections WHERE run_id = ? AND scenario = 'weak'", [run_id])
    assert weak and all(f is None for (f,) in weak)


def test_the_flag_is_printed(warehouse: Path, capsys) -> None:
    code, out, _ = _project(warehouse, STUDY, "--run", "ddp-ws2", "--world-sizes", "8,16,64", capsys=capsys)
    assert code == 0
    lines = out.splitlines()
    assert any(line.startswith("        16 ") and line.endswith("(flagged)") for line in lines), out
    assert not any(line.startswith("         8 ") and "(flagged)" in line for line in lines)
    assert (
        "  flagged at 16, 64: a global batch of 8 sequence(s) is less than one per data-parallel rank" in out
    )


def test_a_study_projects_every_run_it_can_and_lists_the_others(warehouse: Path, capsys) -> None:
    code, out, err = _project(warehouse, STUDY, "--world-sizes", "7", capsys=capsys)
    assert code == 1
    failed = [line for line in err.splitlines() if " not projected: " in line]
    assert failed == [
        f"tracehouse project: {STUDY}/{run} not projected: world size 7 is not a multiple of the run's "
        f"tp x pp = 2 ({STUDY}/{run})"
        for run in ("fsdp_tp-ws4-tp2", "pp-ws2", "tp-ws2")
    ]
    assert err.splitlines()[-1] == "tracehouse project: 6 run(s) projected, 3 not"
    stored = [r for (r,) in _rows(warehouse, "SELECT DISTINCT run_id FROM projections ORDER BY 1")]
    assert stored == ["ddp-ws1", "ddp-ws2", "ddp-ws4", "fsdp-ws1", "fsdp-ws2", "fsdp-ws4"]
    assert "tiny-cpu-gloo/ddp-ws4 (measured at 4 device(s))" in out


def test_measured_points_stand_beside_the_projected_ones(warehouse: Path, capsys) -> None:
    code, out, _ = _project(warehouse, STUDY, "--run", "ddp-ws1", "--world-sizes", "2,4,8", capsys=capsys)
    assert code == 0
    measured = dict(
        (run, (step, per_device))
        for run, step, per_device in _rows(
            warehouse, "SELECT run_id, step_time_us, tokens_per_s_per_device FROM scale_points"
        )
    )
    rows = _rows(
        warehouse,
        "SELECT world_size, measured_run_id, measured_step_time_us, measured_tokens_per_s_per_device "
        "FROM projections ORDER BY world_size",
    )
    by_size = {r[0]: r[1:] for r in rows}
    assert by_size[2] == ("ddp-ws2", *measured["ddp-ws2"])
    assert by_size[4] == ("ddp-ws4", *measured["ddp-ws4"])
    assert by_size[8] == (None, None, None)
    assert by_size[1][0] == "ddp-ws1"
    assert "  measured: 1 by ddp-ws1, 2 by ddp-ws2, 4 by ddp-ws4\n" in out
    line = next(x for x in out.splitlines() if x.startswith("         2 "))
    assert f"{measured['ddp-ws2'][0] / 1000:10.2f}" in line and f"{measured['ddp-ws2'][1]:10.1f}" in line
    # Weak scaling doubles the tokens per step at 2 devices: ddp-ws2 measured another workload.
    assert (
        _project(warehouse, STUDY, "--run", "ddp-ws1", "--world-sizes", "2", "--weak-scaling", capsys=capsys)[
            0
        ]
        == 0
    )
    weak = _rows(
        warehouse, "SELECT measured_run_id FROM projections WHERE scenario = 'weak' AND world_size = 2"
    )
    assert weak == [(None,)]


def test_the_knee_note_says_the_knee(warehouse: Path) -> None:
    results = tracehouse.project(warehouse, study=STUDY, world_sizes=[2, 4, 8])
    knees = [r for r in results if r.knee is not None]
    assert len(knees) == 9  # every run
    for run in knees:
        assert run.knee_note == f"knee at {run.knee} devices"
        assert {p.knee_note for p in run.points} == {run.knee_note}
    # Weak scaling on an ideal network: every added device brings the measured throughput per device.
    (ideal,) = tracehouse.project(
        warehouse, study=STUDY, run="ddp-ws2", world_sizes=[4, 8], ideal_network=True, weak_scaling=True
    )
    assert ideal.knee is None
    assert ideal.knee_note == (
        "no knee up to 8 devices: every added device brings at least half the measured throughput per device"
    )


def test_projections_show_as_tables_in_a_notebook(warehouse: Path) -> None:
    results = tracehouse.project(warehouse, study=STUDY, world_sizes=[2, 8])
    ddp1 = next(r for r in results if r.facts.run_id == "ddp-ws1")
    assert repr(ddp1) == (
        f"<RunProjection {STUDY}/ddp-ws1: measured at 1 device(s), 3 point(s), {ddp1.knee_note}>"
    )
    frame = ddp1.pl()
    assert frame["world_size"].to_list() == [1, 2, 8]
    assert frame["step_time_us"].to_list() == [p.step_time_us for p in ddp1.points]
    assert ddp1.df().shape == frame.shape
    # Typed columns even where every value is NULL (no point of ddp-ws1 at 2 and 8 is flagged).
    assert frame["flag"].dtype == pl.String and frame["flag"].null_count() == 3
    page = ddp1._repr_html_()
    assert page.count("<table") == 1 and "ddp-ws1" in page and "scaling_efficiency" in page
    pp = next(r for r in results if r.facts.run_id == "pp-ws2")
    assert "dp=4,pp=2" in pp._repr_html_()
    assert results.pl().height == sum(len(r.points) for r in results)
    assert results._repr_html_().count("<table") == len(results) == 9
    assert repr(results).startswith("<Projections of 9 run(s): ddp-ws1, ddp-ws2")
    assert len(repr(results).splitlines()) == 1


def test_a_pipeline_on_one_replica_needs_its_stages_sizes(warehouse: Path) -> None:
    with duckdb.connect(str(warehouse / "tracehouse.duckdb")) as con:
        con.execute("UPDATE run_manifests SET model_config = NULL, n_params = NULL WHERE run_id = 'pp-ws2'")
    (run,) = tracehouse.project(warehouse, study=STUDY, run="pp-ws2", world_sizes=[4])
    assert [p.world_size for p in run.points] == [2]
    assert run.refused == {
        4: f"{GAP}: its manifest gives no reference model_config nor n_params, or no known dtype, to size "
        "a stage's gradients"
    }


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            "n_params = NULL",
            "its manifest gives no n_params, or no known dtype, to size the gradient all-reduce",
        ),
        (
            "dtype = 'int4'",
            "its manifest gives no n_params, or no known dtype, to size the gradient all-reduce",
        ),
    ],
)
def test_ddp_on_one_device_needs_the_parameter_count_and_dtype(
    warehouse: Path, change: str, reason: str
) -> None:
    with duckdb.connect(str(warehouse / "tracehouse.duckdb")) as con:
        con.execute(f"UPDATE run_manifests SET {change} WHERE run_id = 'ddp-ws1'")
    (run,) = tracehouse.project(warehouse, study=STUDY, run="ddp-ws1", world_sizes=[2])
    assert [p.world_size for p in run.points] == [1]
    assert run.refused == {2: f"{GAP}: {reason}"}
    assert run.notes == [f"not projected at 2: {run.refused[2]}"]


def test_a_study_where_no_run_can_be_projected_stores_nothing_and_keeps_what_was_stored(
    warehouse: Path,
) -> None:
    from tracehouse.pipeline.projection.project import store_projections
    from tracehouse.pipeline.projection.results import Projections

    tracehouse.project(warehouse, study=STUDY, run="ddp-ws2", world_sizes=[4])
    before = _rows(warehouse, "SELECT run_id, world_size, step_time_us FROM projections ORDER BY 2")
    with duckdb.connect(str(warehouse / "tracehouse.duckdb")) as con:
        assert store_projections(con, Projections(failed={"tp-ws2": "world size 7 is not a multiple"})) == 0
    assert _rows(warehouse, "SELECT run_id, world_size, step_time_us FROM projections ORDER BY 2") == before
    assert [r[1] for r in before] == [2, 4]
