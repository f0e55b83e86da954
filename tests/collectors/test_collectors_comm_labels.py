"""Collective labels on a real one-rank gloo group, in process: names, sizes, seq, and clean undo."""

from __future__ import annotations

import socket
import time
import warnings
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from tracehouse.collectors.comm_labels import label_collectives
from tracehouse.pipeline.common.comm_label import parse_label


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def gloo_group() -> Iterator[dist.ProcessGroup]:
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.barrier()
    time.sleep(0.2)  # see train.quiesce: let gloo's threads drop finished work first
    dist.destroy_process_group()


def labels_of(run) -> list[dict[str, str]]:
    """Run the callable under label_collectives and the profiler; the labels, in order."""
    with (
        label_collectives(),
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof,
    ):
        run()
    events = sorted((e for e in prof.events() if parse_label(e.name)), key=lambda e: e.time_range.start)
    return [parse_label(e.name) for e in events]


def test_c10d_collectives_are_labelled_once_with_nccl_tests_sizes(gloo_group: dist.ProcessGroup) -> None:
    x = torch.ones(10, dtype=torch.float32)

    def run() -> None:
        dist.all_reduce(x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            dist.all_gather_into_tensor(
                torch.empty(10, dtype=torch.bfloat16), torch.ones(10, dtype=torch.bfloat16)
            )
        dist.reduce_scatter_single(torch.empty(6, dtype=torch.int64), torch.ones(6, dtype=torch.int64))
        dist.broadcast(x, src=0, group=gloo_group)
        dist.barrier()

    labels = labels_of(run)
    assert [(lab["op"], lab["bytes"], lab["dtype"]) for lab in labels] == [
        ("all_reduce", "40", "float32"),
        ("all_gather", "20", "bfloat16"),  # the deprecated alias calls all_gather_single: one label
        ("reduce_scatter", "48", "int64"),
        ("broadcast", "40", "float32"),
        ("barrier", "0", "none"),
    ]
    assert [lab["seq"] for lab in labels] == ["0", "1", "2", "3", "4"]
    assert {(lab["pg"], lab["pg_desc"], lab["group_size"]) for lab in labels} == {
        (gloo_group.group_name, "default_pg", "1")
    }


def test_functional_collectives_as_dtensor_calls_them(gloo_group: dist.ProcessGroup) -> None:
    x = torch.ones(4, 3)

    def run() -> None:
        funcol.all_reduce(x, "sum", gloo_group).wait()
        funcol.all_gather_single(x, 0, gloo_group).wait()

    labels = labels_of(run)
    assert [(lab["op"], lab["bytes"], lab["seq"]) for lab in labels] == [
        ("all_reduce", "48", "0"),  # seq restarts: one counter per labelling block and group
        ("all_gather", "48", "1"),  # one rank's 48 bytes x group size 1
    ]


def test_originals_are_restored_after_the_block(gloo_group: dist.ProcessGroup) -> None:
    before = (dist.all_reduce, dist.distributed_c10d.all_reduce, funcol.all_reduce, dist.batch_isend_irecv)
    with label_collectives():
        assert dist.all_reduce is not before[0]
        assert dist.all_reduce is dist.distributed_c10d.all_reduce  # one wrapper, both names
    assert (
        dist.all_reduce,
        dist.distributed_c10d.all_reduce,
        funcol.all_reduce,
        dist.batch_isend_irecv,
    ) == before


def test_unprofiled_calls_still_work(gloo_group: dist.ProcessGroup) -> None:
    x = torch.full((3,), 2.0)
    with label_collectives():
        dist.all_reduce(x)
    assert x.tolist() == [2.0, 2.0, 2.0]
