"""A different DDP bucket size (docs/projection.md, Scenarios): the regrouping against a brute-force
oracle, and the sample DDP runs' gradient all-reduces regrouped step by step."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.errors import TracehouseError
from tracehouse.pipeline.projection.buckets import regrouped, step_groups
from tracehouse.pipeline.projection.critical_rows import built_run
from tracehouse.pipeline.projection.network import Link, NetworkModel
from tracehouse.pipeline.projection.scenario import Scenario, instance_transfers, is_data_parallel, layout_for
from tracehouse.pipeline.warehouse.reading import open_reader

STUDY = "tiny-cpu-gloo"
# Latency and bandwidth: fewer, larger buckets pay fewer latencies.
NETWORK = NetworkModel(
    devices_per_node=8, links={("*", "intra_node"): Link(busbw_gbps=10.0, latency_us=50.0)}
)


def test_regrouping_by_hand():
    # DDP's first bucket keeps its size; 2.5 + 2.5 bytes after it, cut into buckets of 1
    assert regrouped([1.0, 2.5, 2.5], 1.0) == [[1.0], [1.0, 1.0], [1.0, 1.0, 1.0]]
    assert regrouped([1.0, 2.5, 2.5], 10.0) == [[1.0], [], [5.0]]  # one bucket, ready with the last
    assert regrouped([1.0, 2.5, 2.5], 2.5) == [[1.0], [2.5], [2.5]]  # the measured cut
    assert regrouped([1.0], 0.5) == [[1.0]] and regrouped([], 1.0) == []


@given(st.lists(st.integers(1, 50), min_size=1, max_size=8), st.integers(1, 60))
def test_every_byte_moves_once_in_buckets_carried_where_their_last_byte_was_ready(sizes, cap):
    carried = regrouped([float(s) for s in sizes], float(cap))
    assert carried[0] == [sizes[0]]
    # brute force: walk the bytes after the first bucket one by one, cutting every `cap`
    owner = [k for k, size in enumerate(sizes) if k for _ in range(size)]
    expected: list[list[float]] = [[] for _ in sizes]
    for first in range(0, len(owner), cap):
        last = min(first + cap, len(owner)) - 1
        expected[owner[last]].append(float(last - first + 1))
    assert carried[1:] == expected[1:]


@cache
def _built(warehouse: Path, run_id: str) -> tuple:
    with open_reader(warehouse) as con:
        return built_run(con, STUDY, run_id)


@pytest.mark.parametrize("run_id", ["ddp-ws2", "ddp-ws1"])  # measured buckets; planned ones
def test_one_large_bucket_moves_each_step_s_gradients_at_its_last_bucket(sample_warehouse: Path, run_id):
    timeline, run = _built(sample_warehouse, run_id)
    layout = layout_for(timeline.facts, 8)
    inst = run.instances
    gradients = [
        i
        for i in range(len(inst.members))
        if inst.op[i] == "all_reduce" and is_data_parallel(inst.dim[i], layout) and inst.bytes[i]
    ]
    groups = step_groups(run, gradients)
    assert len(groups) >= 2 and all(len(g) >= 2 for g in groups)  # two buckets a step: 1 MiB, then the rest
    assert sorted(i for g in groups for i in g) == sorted(gradients)
    base = instance_transfers(run, layout, Scenario(), NETWORK, {}).ns
    large = instance_transfers(run, layout, Scenario(bucket_bytes=1e9), NETWORK, {}).ns
    small = instance_transfers(run, layout, Scenario(bucket_bytes=2e5), NETWORK, {}).ns
    for group in groups:
        first, *rest, last = group
        rest_bytes = sum(inst.bytes[i] for i in [*rest, last])
        assert large[first] == base[first]  # DDP's first bucket keeps its size
        assert all(large[i] == 0 for i in rest)
        assert large[last] == pytest.approx(NETWORK.timed("all_reduce", rest_bytes, 8, None)[0] * 1e3)
        # more, smaller buckets: the same bytes, more latencies
        assert sum(small[i] for i in group) > sum(base[i] for i in group) >= sum(large[i] for i in group)
    others = [i for i in range(len(inst.members)) if i not in set(gradients)]
    assert all(large[i] == base[i] for i in others)


def test_only_ddp_runs_regroup_and_the_size_must_be_positive(sample_warehouse: Path, tmp_path: Path, capsys):
    timeline, run = _built(sample_warehouse, "fsdp-ws2")
    layout = layout_for(timeline.facts, 8)
    base = instance_transfers(run, layout, Scenario(), NETWORK, {}).ns
    assert (instance_transfers(run, layout, Scenario(bucket_bytes=1e9), NETWORK, {}).ns == base).all()
    with pytest.raises(TracehouseError, match="bucket-mb must be > 0"):
        Scenario(bucket_bytes=0)
    args = ["project", "--warehouse", str(tmp_path / "none"), "--study", STUDY, "--world-sizes", "8"]
    capsys.readouterr()
    assert main([*args, "--bucket-mb", "-1"]) == 2
    assert capsys.readouterr().err == "tracehouse project: error: invalid scenario: bucket-mb must be > 0\n"
