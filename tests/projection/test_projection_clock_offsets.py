"""A collective's arrival on the reference host's clock (docs/projection.md "Collectives"): the
estimated offsets of clock_offsets are applied inside the replay, never to stored timestamps."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import numpy as np
from tracehouse.pipeline.projection.build import build_run_graph, join_instances
from tracehouse.pipeline.projection.context import Instances
from tracehouse.pipeline.projection.graph import Cost, GraphBuilder
from tracehouse.pipeline.projection.project import identity_check
from tracehouse.pipeline.projection.timeline import load_run
from tracehouse.pipeline.warehouse.reading import open_reader

US = 1000
SKEW = 50 * US  # host B's clock runs 50 µs ahead of host A's


def _two_hosts(offsets: dict[int, int]):
    """Rank 0 (host A) computes 100 µs, rank 1 (host B) 80 µs, from the same true instant; then
    one all_reduce whose transfer takes 50 µs. On raw timestamps rank 1 starts it at 130 µs."""
    b = GraphBuilder()
    s0, c0, e0 = b.node(0, 0), b.node(100 * US, 0), b.node(150 * US, 0)
    s1, c1, e1 = b.node(SKEW, 1), b.node(SKEW + 80 * US, 1), b.node(SKEW + 150 * US, 1)
    b.edge(s0, c0, base=100 * US, cost=Cost.COMPUTE_OTHER)
    b.edge(s1, c1, base=80 * US, cost=Cost.COMPUTE_OTHER)
    instances = Instances()
    row = {"transfer_ns": 50.0 * US, "op": "all_reduce", "bytes": 4, "group_size": 2, "parallel_dim": "dp"}
    i = instances.add(("pg", 0), row)
    instances.members[i] += [(0, c0, e0), (1, c1, e1)]
    join_instances(b, instances, offsets)
    return b.freeze(), np.array(instances.transfer_ns), (e0, e1)


def _rank0_compute_halved(g, transfer: np.ndarray) -> np.ndarray:
    weights = g.measured_weights(transfer)
    first = int(np.flatnonzero((g.cost == Cost.COMPUTE_OTHER) & (g.rank[g.dst] == 0))[0])
    weights[first] = g.base[first] / 2
    return weights


def test_a_host_whose_clock_runs_ahead_does_not_always_look_last() -> None:
    g, transfer, (e0, e1) = _two_hosts({0: 0, 1: SKEW})
    weights = g.measured_weights(transfer)
    times, winners = g.replay_with_winners(weights)
    np.testing.assert_array_equal(times, g.measured_times())  # the identity holds with offsets applied
    arrival = int(np.flatnonzero(g.rank == -1)[0])
    assert g.rank[g.src[winners[arrival]]] == 0, "rank 0 arrived last on a common clock"
    # rank 0 holds the step: halving its compute ends it 20 µs sooner (rank 1 then arrives last)
    faster = g.replay(_rank0_compute_halved(g, transfer))
    assert faster[e0] == times[e0] - 20 * US
    assert faster[e1] == times[e1] - 20 * US


def test_raw_arrivals_make_the_skewed_host_look_last() -> None:
    """What applying the offsets fixes: on raw clocks rank 1 is always last, and rank 0's compute
    never matters."""
    g, transfer, (e0, _) = _two_hosts({})
    times = g.replay(g.measured_weights(transfer))
    assert g.replay(_rank0_compute_halved(g, transfer))[e0] == times[e0]


def test_the_replay_reads_each_rank_s_host_offset_from_clock_offsets(
    sample_warehouse: Path, tmp_path: Path
) -> None:
    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    with duckdb.connect(str(warehouse / "tracehouse.duckdb")) as con:  # rank 1 on a second host
        con.execute("UPDATE traces SET host = 'second-host' WHERE run_id = 'ddp-ws2' AND rank = 1")
    with open_reader(warehouse) as con:
        (offset_us,) = con.execute(
            "SELECT offset_us FROM clock_offsets WHERE run_id = 'ddp-ws2' AND host = 'second-host'"
        ).fetchone()
        timeline = load_run(con, "tiny-cpu-gloo", "ddp-ws2")
    assert timeline.clock_offsets_ns() == {0: 0, 1: round(offset_us * 1000)}
    assert offset_us != 0
    run = build_run_graph(timeline)
    check = identity_check(run, timeline.measured_windows())
    assert check.max_error <= 0.0005, check.steps  # applied inside the replay, still exact
