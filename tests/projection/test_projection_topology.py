"""A collective's network level comes from where its group sits (its ranks and the rank -> host
map), never from its size: a strided data-parallel group {r, r+8} on 2x8 devices is inter-node."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from support.testdata import SAMPLE_TRACES
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.network import (
    Link,
    NetworkModel,
    Placement,
    calibrated_network,
    load_network_file,
    network_path,
    packed_hosts,
    place_group,
    shipped_networks,
)
from tracehouse.pipeline.projection.scenario import Layout, group_placement, group_ranks
from tracehouse.pipeline.warehouse.reading import open_reader

TWO_BY_EIGHT = packed_hosts(16, 8)
NVLINK, IB = Link(busbw_gbps=400.0, latency_us=2.0), Link(busbw_gbps=40.0, latency_us=10.0)


def _model() -> NetworkModel:
    return NetworkModel(devices_per_node=8, links={("*", "intra_node"): NVLINK, ("*", "inter_node"): IB})


def test_groups_on_a_2x8_rank_to_host_map_are_placed_by_their_ranks() -> None:
    assert TWO_BY_EIGHT[7] == 0 and TWO_BY_EIGHT[8] == 1
    assert place_group([3, 11], TWO_BY_EIGHT) == Placement(nodes=2, ranks_per_node=1)  # strided pair
    assert place_group([8, 9], TWO_BY_EIGHT) == Placement(nodes=1, ranks_per_node=2)  # contiguous pair
    assert place_group(range(8), TWO_BY_EIGHT) == Placement(nodes=1, ranks_per_node=8)
    assert place_group(range(0, 16, 2), TWO_BY_EIGHT) == Placement(nodes=2, ranks_per_node=4)
    assert place_group(range(16), TWO_BY_EIGHT) == Placement(nodes=2, ranks_per_node=8)
    assert place_group([0, 1], {0: "a"}) is None  # a rank without a host: unknown, not intra-node


def test_a_strided_data_parallel_pair_on_the_projected_mesh_is_costed_inter_node() -> None:
    # (dp=2, tp=8) on 16 ranks: dp groups are {m, m+8}, tp groups {8d .. 8d+7}
    layout = Layout("fsdp_tp", world_size=16, dp=2, model_parallel=8, dp_new=2)
    dp_pair = group_placement([3, 11], "dp", 2, layout, {}, devices_per_node=8)
    tp_block = group_placement(list(range(8, 16)), "tp", 8, layout, {}, devices_per_node=8)
    assert dp_pair == Placement(nodes=2, ranks_per_node=1)
    assert tp_block == Placement(nodes=1, ranks_per_node=8)
    model = _model()
    # all_reduce over 2 ranks of 1 MB: 2 hops x latency + 1 MB x 1 / busbw
    assert model.time_us("all_reduce", 1e6, 2, dp_pair) == pytest.approx(2 * 10.0 + 1e6 / 40e3)
    assert model.time_us("all_reduce", 1e6, 8, tp_block) == pytest.approx(6 * 2.0 + 1e6 * 1.75 / 400e3)


def test_projected_data_parallel_groups_keep_their_stride_and_model_parallel_groups_their_ranks() -> None:
    grown = Layout("fsdp_tp", world_size=4, dp=2, model_parallel=2, dp_new=8)
    assert group_ranks([1, 3], "dp", 8, grown) == [1, 3, 5, 7, 9, 11, 13, 15]
    assert group_ranks([2, 3], "tp", 2, grown) == [2, 3]
    assert group_ranks([0, 1, 2, 3], "world", 16, grown) == list(range(16))
    ddp = Layout("ddp", world_size=2, dp=2, model_parallel=1, dp_new=16)
    assert group_ranks([0, 1], "dp", 16, ddp) == list(range(16))
    planned = group_placement(
        [0], "dp", 4, ddp, {}, devices_per_node=8
    )  # a planned all-reduce, seen on rank 0
    assert planned == Placement(nodes=1, ranks_per_node=4)
    shrunk = Layout("fsdp_tp", world_size=16, dp=8, model_parallel=2, dp_new=2)
    assert group_ranks([14, 15], "tp", 2, shrunk) == [0, 1]


def test_the_measured_layout_is_placed_on_the_traces_hosts_not_on_the_node_capacity() -> None:
    layout = Layout("fsdp_tp", world_size=4, dp=2, model_parallel=2, dp_new=2)
    hosts = {0: "a", 1: "a", 2: "b", 3: "b"}
    assert group_placement([0, 2], "dp", 2, layout, hosts, devices_per_node=8) == Placement(2, 1)
    assert group_placement([0, 1], "tp", 2, layout, hosts, devices_per_node=8) == Placement(1, 2)
    # hosts unknown: the mesh packed into nodes of 8 puts all four ranks on one node
    assert group_placement([0, 2], "dp", 2, layout, {}, devices_per_node=8) == Placement(1, 2)


def _two_host_run(target: Path) -> Path:
    """The recorded fsdp_tp-ws4-tp2 run with ranks 0-1 on host node-a and 2-3 on node-b."""
    source = SAMPLE_TRACES / "tiny-cpu-gloo" / "fsdp_tp-ws4-tp2"
    if not source.is_dir():
        pytest.skip("sample_traces/ holds no fsdp_tp run")
    run = target / "fsdp_tp-ws4-tp2"
    shutil.copytree(source, run)
    for rank in range(4):
        path = run / f"rank{rank}.pt.trace.json.gz"
        trace = json.loads(gzip.decompress(path.read_bytes()))
        trace["host_name"] = "node-a" if rank < 2 else "node-b"
        path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest.update(nodes=2, devices_per_node=2, hosts=["node-a", "node-b"])
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_fitted_curves_of_a_two_host_run_file_strided_groups_as_inter_node(tmp_path: Path) -> None:
    from tracehouse.pipeline.ingest.driver import ingest

    run = _two_host_run(tmp_path / "traces")
    warehouse = tmp_path / "warehouse"
    assert ingest([run], warehouse).failed == []
    with open_reader(warehouse) as con:
        placed = con.execute(
            """SELECT g.members, min(n.nodes), max(n.nodes), min(n.ranks_per_node), max(n.ranks_per_node)
               FROM network_curves AS n
               JOIN (SELECT process_group, instance_no, list(DISTINCT rank ORDER BY rank) AS members
                     FROM collective_instances GROUP BY ALL) AS g USING (process_group, instance_no)
               WHERE n.source = 'trace' GROUP BY 1"""
        ).fetchall()
        net = calibrated_network(con, study="tiny-cpu-gloo", run_id="fsdp_tp-ws4-tp2", devices_per_node=2)
    by_group = {tuple(members): tuple(rest) for members, *rest in placed}
    for dp_group in ((0, 2), (1, 3)):  # one rank on each host
        assert by_group[dp_group] == (2, 2, 1, 1)
    for tp_group in ((0, 1), (2, 3)):  # both ranks on one host
        assert by_group[tp_group] == (1, 1, 2, 2)
    levels = {level for _, level in net.links}
    assert levels == {"intra_node", "inter_node"}
    fsdp_ops = {op for op, level in net.links if level == "inter_node"}
    assert fsdp_ops & {"all_gather", "reduce_scatter"}, net.links


def test_the_shipped_descriptions_load_and_say_where_each_value_comes_from() -> None:
    shipped = shipped_networks()
    assert set(shipped) == {"dgx-a100", "dgx-h100", "mi300x-platform"}
    peaks = {"dgx-a100": (300.0, 25.0), "dgx-h100": (450.0, 50.0), "mi300x-platform": (448.0, 50.0)}
    for name, path in shipped.items():
        model = load_network_file(network_path(name))
        assert model.devices_per_node == 8
        intra, inter = model.links[("*", "intra_node")], model.links[("*", "inter_node")]
        assert (intra.busbw_gbps, inter.busbw_gbps) == peaks[name]
        for line in path.read_text().splitlines():
            if "=" in line and not line.startswith(("#", "[")):  # every value names its source
                assert "# [" in line or "no vendor figure" in line, (name, line)
        assert "https://www." in path.read_text()


def test_an_unknown_network_names_the_shipped_ones(tmp_path: Path) -> None:
    with pytest.raises(
        TracehouseError, match=r"nope: no such network file, nor a shipped description \(dgx-a100"
    ):
        network_path("nope")
    own = tmp_path / "dgx-h100"
    own.write_text("[intra_node]\nbusbw_gbps = 1\n")
    assert network_path(own) == own  # a file of that name wins


def test_a_described_all_reduce_across_nodes_takes_the_faster_of_flat_and_two_level() -> None:
    model = load_network_file(network_path("dgx-h100"))
    nvlink, nic = model.links[("*", "intra_node")], model.links[("*", "inter_node")]
    size, k, m = float(1 << 30), 8, 2
    # by hand: reduce-scatter and all-gather in the node (7 steps of 1/8 each), all-reduce of 1/8 across
    rs = ag = nvlink.latency_us * 7 + size * 7 / 8 / (nvlink.busbw_gbps * 1e3)
    across = nic.latency_us * 2 + (size / 8) * 1.0 / (nic.busbw_gbps * 1e3)
    time, link = model.timed("all_reduce", size, k * m, Placement(nodes=m, ranks_per_node=k))
    assert time == pytest.approx(rs + across + ag) and link is nic
    flat = nic.time_us("all_reduce", size, k * m)
    assert time < flat / 3
    # one rank per node (a strided pair) and one node keep the flat ring of their level
    assert model.timed("all_reduce", size, 2, Placement(nodes=2, ranks_per_node=1))[0] == nic.time_us(
        "all_reduce", size, 2
    )
    assert model.timed("all_reduce", size, 8, Placement(nodes=1, ranks_per_node=8))[0] == nvlink.time_us(
        "all_reduce", size, 8
    )
    # other ops, and a fitted network (what a library achieved at each placement), stay flat
    assert model.timed("all_gather", size, 16, Placement(nodes=2, ranks_per_node=8))[0] == nic.time_us(
        "all_gather", size, 16
    )
    fitted = _model()
    assert fitted.time_us("all_reduce", size, 16, Placement(nodes=2, ranks_per_node=8)) == IB.time_us(
        "all_reduce", size, 16
    )


def test_a_shipped_network_projects_a_sample_run(sample_warehouse: Path, tmp_path: Path, capsys) -> None:
    from tracehouse.pipeline.cli.main import main

    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    args = ["project", "--warehouse", str(warehouse), "--study", "tiny-cpu-gloo", "--run", "ddp-ws2"]
    assert main([*args, "--world-sizes", "16,64", "--network", "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert "network from dgx-h100.toml (shipped with tracehouse), 8 devices per node" in out
    assert main([*args, "--world-sizes", "16", "--network", "dgx-z"]) == 2
    assert "dgx-z: no such network file, nor a shipped description" in capsys.readouterr().err
