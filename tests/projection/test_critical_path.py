"""The critical path across ranks and op slack (docs/projection.md "Critical path"): against a
brute-force longest-path oracle on generated graphs, summing to the replayed step on every sample
and shared trace, crossing ranks where a collective waits, and stored by `tracehouse critical-path`."""

from __future__ import annotations

import shutil
from itertools import pairwise
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.replay_dags import build_dag, dags
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.projection.build import build_run_graph
from tracehouse.pipeline.projection.critical import (
    edge_slack,
    latest_times,
    path_segments,
    step_paths,
    walk_back,
)
from tracehouse.pipeline.projection.critical_rows import built_run, run_paths
from tracehouse.pipeline.projection.timeline import load_run
from tracehouse.pipeline.warehouse.reading import open_reader


def _paths_into(node, measured, edges):
    """Oracle: every path that ends at `node` and starts at a node without incoming edges, as
    (length from the run's first instant, edges as (src, dst, w)), by enumeration."""
    incoming = [e for e in edges if e[1] == node]
    if not incoming:
        return [(float(measured[node] - min(measured)), [])]
    out = []
    for src, dst, w in incoming:
        out += [(length + w, [*path, (src, dst, w)]) for length, path in _paths_into(src, measured, edges)]
    return out


def _longest_from(node, target, edges):
    """Oracle: the longest path length from `node` to `target` (None: none), by enumeration."""
    if node == target:
        return 0.0
    lengths = []
    for src, dst, w in edges:
        rest = _longest_from(dst, target, edges) if src == node else None
        if rest is not None:
            lengths.append(w + rest)
    return max(lengths) if lengths else None


@settings(max_examples=300, deadline=None)
@given(dags(max_nodes=9), st.data())
def test_the_path_is_a_longest_path_from_an_anchor(dag, data) -> None:
    measured, edges = dag
    g = build_dag(measured, edges)
    weights = g.fixed + g.base
    times, winners = g.replay_with_winners(weights)
    end = data.draw(st.integers(0, len(measured) - 1))
    walked = walk_back(g, times, winners, end, -np.inf)
    assert walked[0] == -1, "a path walked to the beginning starts at an anchor"
    path = [(int(g.src[e]), int(g.dst[e]), int(weights[e])) for e in walked[1:]]
    anchor = path[0][0] if path else end
    for (_, dst, _), (src, _, _) in pairwise(path):
        assert dst == src, "consecutive edges"
    assert (path[-1][1] if path else anchor) == end
    oracle = _paths_into(end, measured, edges)
    longest = max(length for length, _ in oracle)
    assert float(measured[anchor] - min(measured)) + sum(w for *_, w in path) == longest == times[end]
    assert (longest, path) in oracle
    # segments from any instant before the end sum to the time from it, to the ns
    start = float(data.draw(st.integers(-100, max(0, int(times[end])))))
    segments = path_segments(g, times, walk_back(g, times, winners, end, start), end, start)
    if times[end] > start:
        assert sum(s.dur_ns for s in segments) == times[end] - start
        assert all(a.start_ns + a.dur_ns == b.start_ns for a, b in pairwise(segments))


@settings(max_examples=300, deadline=None)
@given(dags(max_nodes=9), st.data())
def test_slack_is_what_an_edge_can_grow_before_the_end_moves(dag, data) -> None:
    measured, edges = dag
    if not edges:
        return
    g = build_dag(measured, edges)
    weights = g.fixed + g.base
    times = g.replay(weights)
    end = int(g.dst[data.draw(st.integers(0, len(weights) - 1))])
    slack = edge_slack(g, times, weights, latest_times(g, weights, {end: times[end]}))
    for k in range(len(weights)):
        rest = _longest_from(int(g.dst[k]), end, edges)
        if rest is None:
            assert slack[k] == np.inf
            continue
        assert slack[k] == times[end] - (times[g.src[k]] + weights[k] + rest)
        longer = weights.copy()
        longer[k] += slack[k]
        assert g.replay(longer)[end] == times[end]
        longer[k] += 1.0
        assert g.replay(longer)[end] == times[end] + 1.0


def _replayable_runs(warehouse: Path) -> list[tuple[str, str]]:
    with open_reader(warehouse) as con:
        return con.execute("SELECT DISTINCT study, run_id FROM step_breakdown ORDER BY 1, 2").fetchall()


def _check_sums(warehouse: Path, study: str, run_id: str) -> None:
    """Every step's path sums to its replayed step (the slowest window) to the ns."""
    with open_reader(warehouse) as con:
        run = build_run_graph(load_run(con, study, run_id))
    weights = run.graph.measured_weights(run.transfer_ns)
    replayed = run.step_times(run.graph.replay(weights))
    paths = step_paths(run, weights)
    assert {p.step for p in paths} == {step for step, ranks in replayed.items() if ranks}, run_id
    for p in paths:
        assert p.step_ns / 1e3 == pytest.approx(max(replayed[p.step].values()), abs=1e-6)
        assert abs(sum(s.dur_ns for s in p.segments) - p.step_ns) < 0.5, (run_id, p.step)
        assert p.segments[0].start_ns == 0.0


def test_paths_sum_to_the_replayed_step_on_every_sample_run(sample_warehouse: Path) -> None:
    runs = _replayable_runs(sample_warehouse)
    assert len(runs) == 9
    for study, run_id in runs:
        _check_sums(sample_warehouse, study, run_id)


def test_paths_sum_to_the_replayed_step_on_every_shared_trace(shared_traces_warehouse: Path) -> None:
    runs = _replayable_runs(shared_traces_warehouse)
    assert len(runs) >= 7, runs
    for study, run_id in runs:
        _check_sums(shared_traces_warehouse, study, run_id)


@pytest.mark.parametrize("run_id", ["ddp-ws2", "ddp-ws4", "fsdp-ws2", "fsdp-ws4"])
def test_the_path_crosses_ranks_where_a_collective_waits(sample_warehouse: Path, run_id: str) -> None:
    with open_reader(sample_warehouse) as con:
        _, run = built_run(con, "tiny-cpu-gloo", run_id)
    paths = run_paths(run)
    crossings = 0
    for p in paths:
        for before, wait, after in zip(p.segments, p.segments[1:], p.segments[2:], strict=False):
            if wait.kind != "wait":
                continue
            waited = int(wait.op.rsplit(" ", 1)[1])
            op = wait.op.split(" waits for rank ")[0]
            assert waited != wait.rank
            assert before.rank == waited, "the path comes from the rank waited for"
            assert (after.rank, after.kind, after.op) == (wait.rank, "transfer", op)
            crossings += 1
    assert crossings >= 1, [sorted({s.rank for s in p.segments}) for p in paths]


def test_cpu_compute_on_the_path_names_the_op_it_is_the_self_time_of(sample_warehouse: Path) -> None:
    with open_reader(sample_warehouse) as con:
        _, run = built_run(con, "tiny-cpu-gloo", "ddp-ws2")
        self_us = {
            (rank, op): us
            for rank, op, us in con.sql(
                "SELECT rank, op, sum(host_us) FROM op_breakdown WHERE run_id = 'ddp-ws2' GROUP BY ALL"
            ).fetchall()
        }
    on_path: dict = {}
    for p in run_paths(run):
        for s in p.segments:
            if s.kind == "compute":
                assert s.op is not None, (p.step, s)
                on_path[(s.rank, s.op)] = on_path.get((s.rank, s.op), 0.0) + s.dur_ns / 1e3
    # the identity replay keeps measured durations: an op's compute on the path is part of its self
    # time on that rank's main thread (op_breakdown.host_us), never more
    assert len({op for _, op in on_path}) >= 5
    for key, us in on_path.items():
        assert us <= self_us[key] + 1e-3, (key, us, self_us[key])


def _rows(warehouse: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_critical_path_says_why_until_projected_then_stores_paths_and_slack(
    sample_warehouse: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    before = _rows(warehouse, "SELECT run_id, kind, reason FROM critical_path ORDER BY run_id")
    assert len(before) == 9, "one row per run after ingest, never a silent empty result"
    assert all(kind is None and reason.startswith("not computed yet") for _, kind, reason in before)
    args = ["project", "--warehouse", str(warehouse), "--study", "tiny-cpu-gloo", "--run", "ddp-ws2"]
    assert main([*args, "--world-sizes", "2"]) == 0
    assert main([*args, "--world-sizes", "4"]) == 0  # again: replaced, not added
    sums = _rows(
        warehouse,
        """SELECT step, any_value(step_us), sum(dur_us), count(DISTINCT rank), count(*) FILTER (kind = 'wait')
           FROM critical_path WHERE run_id = 'ddp-ws2' GROUP BY step ORDER BY step""",
    )
    assert [s[0] for s in sums] == [2, 3, 4]
    for _, step_us, total, _, _ in sums:
        assert total == pytest.approx(step_us, abs=1e-3)  # 1 ns
    assert max(s[3] for s in sums) == 2 and sum(s[4] for s in sums) >= 1
    others = _rows(warehouse, "SELECT DISTINCT reason FROM critical_path WHERE run_id <> 'ddp-ws2'")
    assert len(others) == 1 and others[0][0].startswith("not computed yet")
    on_path = _rows(
        warehouse,
        "SELECT count(*) FROM op_slack WHERE run_id = 'ddp-ws2' AND slack_us = 0 AND kind = 'transfer'",
    )
    assert on_path[0][0] >= 1, "the all_reduce the path waits for has no slack"
    with duckdb.connect(str(warehouse / "tracehouse.duckdb")) as con:  # a trace of the run replaced
        con.execute("UPDATE traces SET content_hash = 'changed' WHERE run_id = 'ddp-ws2' AND rank = 1")
    stale = _rows(warehouse, "SELECT kind, reason FROM critical_path WHERE run_id = 'ddp-ws2'")
    assert len(stale) == 1 and stale[0][0] is None and stale[0][1].startswith("stale")
    assert _rows(warehouse, "SELECT count(*) FROM op_slack WHERE run_id = 'ddp-ws2'") == [(0,)]
