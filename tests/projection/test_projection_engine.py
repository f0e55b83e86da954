"""The replay engine and the network model on small hand-made and generated inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.replay_dags import build_dag, dags
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.graph import Cost, GraphBuilder
from tracehouse.pipeline.projection.network import (
    Link,
    NetworkModel,
    bus_factor,
    fit_link,
    latency_steps,
    load_network_file,
)


def _oracle(measured, edges, weights):
    """Longest-path times by repeated relaxation in node order (anchors keep their measured time)."""
    incoming = {}
    for (src, dst, _), w in zip(edges, weights, strict=True):
        incoming.setdefault(dst, []).append((src, w))
    times = [float(t - min(measured)) for t in measured]
    for node in range(len(measured)):
        if node in incoming:
            times[node] = max(times[src] + w for src, w in incoming[node])
    return times


@settings(max_examples=200, deadline=None)
@given(dags())
def test_the_replay_is_the_longest_path_from_the_anchors(dag) -> None:
    measured, edges = dag
    g = build_dag(measured, edges)
    # The graph's edges are regrouped by destination: map weights back by (src, dst, base).
    weights = g.fixed + g.base
    got = g.replay(weights)
    expected = _oracle(measured, edges, [float(w) for _, _, w in edges])
    np.testing.assert_allclose(got, expected)


@settings(max_examples=200, deadline=None)
@given(dags(), st.integers(0, 1000), st.data())
def test_lengthening_one_edge_moves_the_end_by_what_its_slack_does_not_absorb(dag, d, data) -> None:
    measured, edges = dag
    if not edges:
        return
    g = build_dag(measured, edges)
    weights = g.fixed + g.base
    times = g.replay(weights)
    end = float(times.max())
    k = data.draw(st.integers(0, len(weights) - 1))
    # Slack of edge k towards the latest node (any node may become it): every node's longest
    # tail, by brute force in reverse topological order.
    tail = np.zeros(g.n_nodes)
    for node in reversed(g.order.tolist()):
        out = g.src == node
        if out.any():
            tail[node] = max(tail[node], float(np.max(tail[g.dst[out]] + weights[out])))
    through = times[g.src[k]] + weights[k] + tail[g.dst[k]]
    longer = weights.copy()
    longer[k] += d
    new_end = float(g.replay(longer).max())
    assert new_end == pytest.approx(end + max(0.0, d - (end - through)), abs=1e-9)


def test_a_cycle_is_refused() -> None:
    b = GraphBuilder()
    x, y = b.node(0, 0), b.node(1, 0)
    b.edge(x, y)
    b.edge(y, x)
    with pytest.raises(RuntimeError, match="cycle"):
        b.freeze()


def test_replayed_times_keep_the_nanosecond_on_epoch_clocks() -> None:
    b = GraphBuilder()
    start = b.node(1_796_232_809_105_958_401, 0)
    end = b.node(1_796_232_809_105_958_402, 0)
    b.edge(start, end, base=1.0, cost=Cost.COMPUTE_OTHER)
    g = b.freeze()
    times = g.replay(g.fixed + g.base)
    assert times[end] - times[start] == 1.0


def test_nccl_tests_bus_factors_and_algorithm_hops() -> None:
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 4) == pytest.approx(3 / 4)
    assert bus_factor("broadcast", 4) == 1.0 and bus_factor("all_reduce", 1) == 0.0
    assert latency_steps("all_reduce", 2) == 2  # ring and tree agree
    assert latency_steps("all_reduce", 64) == 12  # tree: 2 log2(64) < ring's 126
    assert latency_steps("all_gather", 64) == 63
    assert latency_steps("broadcast", 5) == 3 and latency_steps("send", 2) == 1


def test_link_time_is_latency_hops_plus_bytes_over_bus_bandwidth() -> None:
    link = Link(busbw_gbps=100.0, latency_us=5.0)
    # all_reduce of 1 GB on 8 ranks: 2*(7/8)*1e9 B / 100 GB/s = 17,500 us; tree hops 6 x 5 us.
    assert link.time_us("all_reduce", 1e9, 8) == pytest.approx(17_500 + 30)
    assert link.time_us("all_reduce", 1e9, 1) == 0.0


@settings(max_examples=100, deadline=None)
@given(
    st.floats(0.5, 500.0),
    st.floats(0.0, 100.0),
    st.lists(st.tuples(st.sampled_from([2, 4, 8, 16]), st.integers(10, 30)), min_size=3, max_size=12),
)
def test_the_fit_recovers_the_link_that_made_the_points(busbw, latency, shape) -> None:
    truth = Link(busbw_gbps=busbw, latency_us=latency)
    points = [("all_gather", float(2**k), n, truth.time_us("all_gather", float(2**k), n)) for n, k in shape]
    design = [(latency_steps("all_gather", n), 2.0**k * bus_factor("all_gather", n)) for n, k in shape]
    if np.linalg.matrix_rank(np.array(design)) < 2:
        # One point, or points whose latency steps and bytes grow together (7 steps and 64 KiB on 8
        # ranks, 1 step and 16 KiB on 2): the two unknowns are not identifiable.
        return
    fitted = fit_link(points)
    assert fitted is not None
    for op, size, n, t in points:
        assert fitted.time_us(op, size, n) == pytest.approx(t, rel=1e-6, abs=1e-6)


def test_a_group_beyond_one_node_uses_the_inter_node_level() -> None:
    model = NetworkModel(
        devices_per_node=8,
        links={("*", "intra_node"): Link(200.0, 2.0), ("*", "inter_node"): Link(20.0, 10.0)},
    )
    assert model.level(8) == "intra_node" and model.level(9) == "inter_node"
    assert model.time_us("all_reduce", 1e8, 16) > model.time_us("all_reduce", 1e8, 8) * 5


def test_network_files(tmp_path: Path) -> None:
    good = tmp_path / "net.toml"
    good.write_text("devices_per_node = 4\n[intra_node]\nbusbw_gbps = 150\nlatency_us = 3\n")
    model = load_network_file(good)
    assert model.devices_per_node == 4 and model.link("all_reduce", 2) == Link(150.0, 3.0)
    assert model.link("all_reduce", 64) == Link(150.0, 3.0)  # no inter_node level: the intra one answers
    assert model.device_memory is None
    good.write_text("device_memory_gb = 80\n[intra_node]\nbusbw_gbps = 150\n")
    assert load_network_file(good).device_memory == 80e9
    for text, message in [
        (
            "device_memory_gb = 0\n[intra_node]\nbusbw_gbps = 1\n",
            "device_memory_gb must be a positive number",
        ),
        (
            'device_memory_gb = "80"\n[intra_node]\nbusbw_gbps = 1\n',
            "device_memory_gb must be a positive number",
        ),
        ("devices_per_node = 4\n", "no \\[intra_node\\] or \\[inter_node\\] level"),
        ("[inter_node]\nlatency_us = 3\n", "needs busbw_gbps"),
        ("[inter_node]\nbusbw_gbps = 0\n", "must be > 0"),
        ("devices_per_node = 0\n[intra_node]\nbusbw_gbps = 1\n", "positive integer"),
        ("[intra_node\n", "cannot read the network file"),
    ]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(TracehouseError, match=message):
            load_network_file(bad)
