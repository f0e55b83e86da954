"""Communication that competes (docs/projection.md): the overlap measures against brute force, the
fits on data made from a known model, the breakdown a projection reports against the measured one
(scale_points) at the measured size, and the fit stored, reused and forgotten with the study."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.projection.breakdown import summarize
from tracehouse.pipeline.projection.build import RunGraph
from tracehouse.pipeline.projection.context import Instances
from tracehouse.pipeline.projection.critical_rows import built_run
from tracehouse.pipeline.projection.graph import Cost, GraphBuilder
from tracehouse.pipeline.projection.interference import (
    DEFAULTS,
    MIN_INSTANCES,
    MIN_SIGNATURES,
    STRETCH_GRID,
    InstanceSample,
    OpCall,
    OpSignature,
    covered,
    fit_compute_stretch,
    fit_interference,
    instance_overlaps,
    op_signatures,
    stored_fits,
    unfitted,
    union_of,
)
from tracehouse.pipeline.projection.network import calibrated_network, rank_hosts
from tracehouse.pipeline.projection.project import node_size, scenario_times
from tracehouse.pipeline.projection.scenario import Scenario, layout_for
from tracehouse.pipeline.warehouse.reading import open_reader

STUDY = "tiny-cpu-gloo"
# Each breakdown component of a projection at the measured size, against the measured run's.
COMPONENT_TOLERANCE = 0.03

spans = st.lists(
    st.tuples(st.integers(0, 100), st.integers(0, 30)).map(lambda t: (float(t[0]), float(t[0] + t[1]))),
    max_size=12,
)


def _brute_cover(rows: list[tuple[float, float]], lo: float, hi: float) -> float:
    """The length of [lo, hi) inside any span, summed over elementary pieces."""
    points = sorted({lo, hi, *[x for span in rows for x in span]})
    total = 0.0
    for a, b in itertools.pairwise(points):
        if lo <= a and b <= hi and any(s <= a and b <= e for s, e in rows if e > s):
            total += b - a
    return total


@settings(max_examples=200, deadline=None)
@given(spans, st.lists(st.tuples(st.integers(-5, 140), st.integers(0, 60)), min_size=1, max_size=6))
def test_covered_equals_a_brute_force_sweep(rows, windows) -> None:
    pairs = np.array(rows, dtype=np.float64).reshape(-1, 2)
    starts, ends = union_of(pairs[:, 0], pairs[:, 1])
    assert np.all(starts[1:] > ends[:-1])  # disjoint and sorted
    lo = np.array([float(a) for a, _ in windows])
    hi = np.array([float(a + w) for a, w in windows])
    got = covered(starts, ends, lo, hi)
    want = [_brute_cover(rows, a, b) for a, b in zip(lo, hi, strict=True)]
    assert got.tolist() == pytest.approx(want, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, len(STRETCH_GRID) - 1),
    st.lists(st.floats(0.2, 5.0), min_size=1, max_size=3),
    st.randoms(use_true_random=False),
)
def test_the_fit_recovers_the_stretch_and_scales_that_made_the_transfers(k, scales, rng) -> None:
    stretch = float(STRETCH_GRID[k])
    samples = []
    for r, scale in enumerate(scales):
        for j in range(MIN_INSTANCES):
            overlap = j / (MIN_INSTANCES - 1)  # 0 .. 1 on every run: stretch and scale separate
            modelled = rng.uniform(1e4, 1e7)
            samples.append(
                InstanceSample(f"run{r}", modelled * scale * (1 + stretch * overlap), modelled, overlap)
            )
    fit = fit_interference("cpu", samples)
    assert fit.stretch == pytest.approx(stretch, abs=1e-9)
    assert [fit.scales[f"run{r}"] for r in range(len(scales))] == pytest.approx(scales, rel=1e-9)
    assert fit.error_after == pytest.approx(0.0, abs=1e-9)
    assert fit.instances == len(samples) and fit.runs == len(scales)


def test_too_few_collectives_or_none_overlapped_fall_back_to_the_device_types_default() -> None:
    few = [InstanceSample("a", 2.0, 1.0, 1.0)] * (MIN_INSTANCES - 1)
    idle = [InstanceSample("a", 2.0, 1.0, 0.0)] * 50
    for samples in (few, idle):
        gpu = fit_interference("gpu", samples)
        assert (gpu.stretch, gpu.instances, gpu.scales) == (0.0, 0, {})
        assert "transfers x (1 + 0 x overlap): none assumed (no multi-rank run" in gpu.describe()
        cpu = fit_interference("cpu", samples)
        assert (cpu.stretch, cpu.compute_stretch, cpu.instances) == (*DEFAULTS["cpu"], 0)
        assert "transfers x (1 + 3.42 x overlap): the default for cpu" in cpu.describe()
    assert unfitted("a100") == fit_interference("a100", few)


def test_the_compute_stretch_is_the_time_weighted_median_over_signatures() -> None:
    # stretches 0.1 (weight 1), 0.2 (weight 20), then 0.8 eight times (weight 1 each): half the
    # time (14.5 of 29) is reached within the 0.2 signature
    rows = [OpSignature(100.0, 110.0, 1.0, 1.0), OpSignature(100.0, 120.0, 1.0, 20.0)]
    rows += [OpSignature(100.0, 140.0, 0.5, 1.0)] * (MIN_SIGNATURES - 2)
    assert fit_compute_stretch(rows) == (pytest.approx(0.2), MIN_SIGNATURES)
    assert fit_compute_stretch(rows[:-1]) is None
    slower_alone = [OpSignature(100.0, 90.0, 1.0, 1.0)] * MIN_SIGNATURES
    assert fit_compute_stretch(slower_alone) == (0.0, MIN_SIGNATURES)  # never below 0


def _one_rank_graph(comm: list[tuple[int, int]]) -> RunGraph:
    """A rank whose only intervals are communication spans (for op_signatures)."""
    b = GraphBuilder()
    intervals = []
    for start, end in comm:
        s, e = b.node(start, 0), b.node(end, 0)
        b.edge(s, e, base=end - start, cost=Cost.COMM_LOCAL)
        intervals.append((0, s, e, "comm", "dp"))
    return RunGraph(b.freeze(), Instances(), np.zeros(1), [], intervals)


def test_op_signatures_compare_calls_alone_and_overlapped_and_leave_out_waits() -> None:
    # communication in flight over [0, 1000) and [4000, 5000) of the replay's frame (origin 1000)
    run = _one_rank_graph([(1000, 2000), (5000, 6000)])
    key = ("aten::mm", "[[8, 8], [8, 8]]", "['float', 'float']", "forward")
    alone = [OpCall(key, 0, 2000.0 + 200 * i, 2100.0 + 200 * i, 100.0, True) for i in range(3)]
    overlapped = [OpCall(key, 0, 100.0 * i, 100.0 * i + 50, 150.0, True) for i in range(3)]
    # the transfer [4000, 5000) of the replay's frame ends inside it: it may have waited for it
    waited = OpCall(key, 0, 4900.0, 5100.0, 10_000.0, True)
    half = OpCall(key, 0, 900.0, 1300.0, 500.0, True)  # a quarter overlapped: neither group
    (signature,) = op_signatures(run, [*alone, *overlapped, waited, half])
    assert (signature.alone_ns, signature.overlapped_ns, signature.overlap) == (100.0, 150.0, 1.0)
    assert signature.weight_ns == 450.0 and signature.stretch == pytest.approx(0.5)
    assert op_signatures(run, [*alone, *overlapped[:2], waited]) == []  # too few overlapped


def test_instance_overlap_is_the_members_compute_share_of_the_transfer() -> None:
    b = GraphBuilder()
    instances = Instances()
    intervals = []
    for rank, (c0, c1) in enumerate([(0, 600), (300, 400)]):  # compute spans per rank
        s, e = b.node(c0, rank), b.node(c1, rank)
        b.edge(s, e, base=c1 - c0, cost=Cost.COMPUTE_OTHER)
        intervals.append((rank, s, e, "compute", None))
    arrival = b.node(200, -1)
    instances.add(
        ("pg", 0),
        {"transfer_ns": 400.0, "op": "all_reduce", "bytes": 8, "group_size": 2, "parallel_dim": "dp"},
    )
    instances.members[0] += [(0, arrival, arrival), (1, arrival, arrival)]
    instances.arrival.append(arrival)
    run = RunGraph(b.freeze(), instances, np.array([400.0]), [], intervals)
    # transfer [200, 600): rank 0 computes all of it, rank 1 a quarter; the mean is 0.625
    (overlap,) = instance_overlaps(run, run.graph.measured_times(), run.transfer_ns)
    assert overlap == pytest.approx(0.625)


@pytest.fixture(scope="module")
def fitted(sample_warehouse: Path) -> dict:
    with open_reader(sample_warehouse) as con:
        fits = stored_fits(con, STUDY)
        assert fits is not None, "the sample warehouse holds the study's fit (conftest)"
        return fits


def _component_shares(result) -> tuple[float, float, float, float]:
    return result.compute_frac, result.exposed_comm_frac, result.other_frac, result.idle_frac


def test_a_projection_reports_the_breakdown_scale_points_does(sample_warehouse: Path) -> None:
    """The identity replay's shares are scale_points' (every rank's windows, summed), to what the
    replay itself leaves (dependencies it drops: at most 0.02 % of a step, docs/projection.md)."""
    with open_reader(sample_warehouse) as con:
        measured = {
            run: shares
            for run, *shares in con.execute(
                "SELECT run_id, compute_frac, exposed_comm_frac, other_frac, idle_frac FROM scale_points "
                "WHERE study = ?",
                [STUDY],
            ).fetchall()
        }
        for run_id, shares in measured.items():
            _, run = built_run(con, STUDY, run_id)
            replayed = summarize(run, run.graph.replay(run.graph.measured_weights(run.transfer_ns)))
            assert _component_shares(replayed) == pytest.approx(tuple(shares), abs=1e-4), run_id


def test_at_the_measured_size_the_projected_breakdown_is_the_measured_one(
    sample_warehouse: Path, fitted: dict
) -> None:
    """Every sample run with collectives, projected at its own size with the calibrated network and
    the fitted interference: each component within 3 % of the step."""
    checked = 0
    with open_reader(sample_warehouse) as con:
        per_node, _ = node_size(con, STUDY)
        for (run_id,) in con.execute(
            "SELECT DISTINCT run_id FROM collective_instances WHERE study = ? ORDER BY 1", [STUDY]
        ).fetchall():
            timeline, run = built_run(con, STUDY, run_id)
            measured = summarize(run, run.graph.replay(run.graph.measured_weights(run.transfer_ns)))
            network = calibrated_network(con, study=STUDY, run_id=run_id, devices_per_node=per_node)
            layout = layout_for(timeline.facts, timeline.facts.world_size)
            hosts = rank_hosts(con, STUDY, run_id)
            times = scenario_times(run_id, run, layout, Scenario(), network, hosts, fitted["cpu"])
            projected = summarize(run, times)
            gaps = np.abs(np.subtract(_component_shares(projected), _component_shares(measured)))
            assert gaps.max() <= COMPONENT_TOLERANCE, (run_id, gaps)
            checked += 1
    assert checked >= 7


def test_the_sample_study_fit_finds_transfers_that_stretch_under_compute(fitted: dict) -> None:
    """gloo shares the 2 cores with the ranks' compute: overlapped transfers run longer than the
    calibrated curve says, and the stretch explains part of it (least squares over the grid)."""
    fit = fitted["cpu"]
    assert fit.instances >= 100 and fit.runs == 7  # every multi-rank sample run
    assert fit.stretch > 0
    assert fit.error_after < fit.error_before
    assert fit.signatures >= MIN_SIGNATURES
    assert "interference (cpu): transfers x (1 + " in fit.describe()


def _rows(warehouse: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_the_fit_is_made_once_per_study_reused_and_dropped_with_a_forgotten_run(
    sample_warehouse: Path, tmp_path: Path, capsys
) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    with duckdb.connect(str(warehouse / "tracehouse.duckdb")) as con:
        con.execute("DELETE FROM interference_fits")
    args = ["project", "--warehouse", str(warehouse), "--study", STUDY, "--world-sizes", "8", "--run"]
    assert main([*args, "ddp-ws1"]) == 0
    first = capsys.readouterr()
    assert first.err.count("to fit how communication and compute interfere") == 9  # every run read
    stored = _rows(warehouse, "SELECT device_type, transfer_stretch, collectives FROM interference_fits")
    assert [row[0] for row in stored] == ["cpu"] and stored[0][2] >= 100
    assert main([*args, "ddp-ws1"]) == 0
    again = capsys.readouterr()
    assert "to fit how" not in again.err  # reused
    assert again.out == first.out
    assert main(["forget", "--warehouse", str(warehouse), "--study", STUDY, "pp-ws2"]) == 0
    assert _rows(warehouse, "SELECT count(*) FROM interference_fits") == [(0,)]
    assert main([*args, "ddp-ws1", "--no-interference"]) == 0
    out = capsys.readouterr()
    assert "to fit how" not in out.err and "no interference" in out.out
    assert _rows(warehouse, "SELECT count(*) FROM interference_fits") == [(0,)]


def test_every_projected_point_says_what_it_rests_on(sample_warehouse: Path, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    args = ["project", "--warehouse", str(warehouse), "--study", STUDY, "--world-sizes", "2,8", "--run"]
    assert main([*args, "ddp-ws1"]) == 0
    assert main([*args, "fsdp-ws2", "--ideal-network"]) == 0
    rows = _rows(warehouse, "SELECT run_id, world_size, provenance FROM projections ORDER BY 1, 2")
    by_run = {}
    for run_id, _, text in rows:
        by_run.setdefault(run_id, set()).add(text)
    assert {run: len(texts) for run, texts in by_run.items()} == {"ddp-ws1": 1, "fsdp-ws2": 1}  # one per run
    ddp = json.loads(by_run["ddp-ws1"].pop())
    assert ddp["replay"]["steps"] >= 2 and ddp["replay"]["max_error"] < 0.05
    assert ddp["network"]["source"] == "network_curves"
    assert set(ddp["network"]["links"].values()) <= {"run", "calibration", "study"}
    assert ddp["network"]["links"]["all_reduce/intra_node"] == "study"  # a one-rank run measured none
    assert ddp["collectives"]["measured"] == 0 and ddp["collectives"]["planned"]["all_reduce"] > 0
    assert ddp["interference"]["device_type"] == "cpu" and ddp["interference"]["collectives"] >= 100
    ideal = json.loads(by_run["fsdp-ws2"].pop())
    assert ideal["network"] is None and ideal["interference"] is None
    assert ideal["collectives"]["measured"] > 0 and ideal["collectives"]["planned"] == {}
