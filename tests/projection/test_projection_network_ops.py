"""Each collective is timed by its own op's network curve: pipeline send/recv by send_recv's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracehouse.pipeline.projection.network import Link, NetworkModel, calibrated_network, fit_link
from tracehouse.pipeline.warehouse.reading import open_reader


def test_send_and_recv_take_the_send_recv_curve_not_all_reduce() -> None:
    all_reduce, send_recv = Link(busbw_gbps=100.0, latency_us=5.0), Link(busbw_gbps=20.0, latency_us=10.0)
    model = NetworkModel(
        devices_per_node=8,
        links={("all_reduce", "intra_node"): all_reduce, ("send_recv", "intra_node"): send_recv},
    )
    for op in ("send", "recv", "send_recv"):
        assert model.link(op, 2) is send_recv
        # one hop, bus factor 1: 10 us + 1 MB / 20 GB/s
        assert model.time_us(op, 1e6, 2) == 10.0 + 50.0
    assert model.link("all_gather", 2) is all_reduce  # an op without a curve still borrows all_reduce's


def test_the_pipeline_run_fits_its_send_recv_pairs_and_times_its_sends_with_them(sample_warehouse) -> None:
    with open_reader(sample_warehouse) as con:
        ops = {
            op
            for (op,) in con.execute(
                "SELECT DISTINCT op FROM collectives WHERE study = 'tiny-cpu-gloo' AND run_id = 'pp-ws2'"
            ).fetchall()
        }
        net = calibrated_network(con, study="tiny-cpu-gloo", run_id="pp-ws2", devices_per_node=8)
    assert {"send", "recv"} <= ops
    fitted = net.links[("send_recv", "intra_node")]
    assert net.link("send", 2) is fitted and net.link("recv", 2) is fitted
    assert fitted is not net.links.get(("all_reduce", "intra_node"))


@settings(max_examples=50, deadline=None)
@given(st.permutations(range(24)), st.floats(1.0, 5e3), st.sampled_from([2, 4, 8]))
def test_points_of_one_size_always_fit_the_same_link_whatever_their_order(order, base_us, n) -> None:
    """One size cannot tell latency from bandwidth: the fit must not flip between the two with the
    order of the points (it did with the rows' order from DuckDB, and a run's projection with it)."""
    rng = np.random.default_rng(7)
    times = base_us * (1 + 0.3 * rng.random(24))
    points = [("all_reduce", 131072.0, n, float(t)) for t in times]
    reference = fit_link(points)
    shuffled = fit_link([points[i] for i in order])
    assert reference is not None and shuffled is not None
    assert shuffled.busbw_gbps == pytest.approx(reference.busbw_gbps, rel=1e-9)
    assert shuffled.latency_us == pytest.approx(reference.latency_us, rel=1e-9, abs=1e-9)
