"""Each collective is timed by its own op's network curve: pipeline send/recv by send_recv's."""

from __future__ import annotations

from tracehouse.pipeline.projection.network import Link, NetworkModel, calibrated_network
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
