"""parse_trace on the real public traces of ../shared/data (one test per format variant).

Every literal here was computed independently with the `json` module (Decimal floats,
exact ns arithmetic), not by running the parser.
"""

from __future__ import annotations

import polars as pl
import pytest
from support.frames import gpu_count, kinds, span
from support.testdata import SHARED_DATA, shared_path
from tracehouse.pipeline.parsers.kineto.parse import parse_trace
from tracehouse.pipeline.warehouse.schema import COLLECTIVES, EVENTS, PROCESS_GROUPS, STEPS, THREADS

ALL_TRACES = sorted(p.relative_to(SHARED_DATA).as_posix() for p in SHARED_DATA.glob("traces/*/*.json.gz"))


@pytest.mark.parametrize("relative", ALL_TRACES or ["traces/hta/pair_sampled_rank-0.json.gz"])
def test_every_shared_trace_parses_with_exact_schema(relative: str) -> None:
    parsed = parse_trace(shared_path(relative))
    assert parsed.events.schema == pl.Schema(EVENTS)
    assert parsed.steps.schema == pl.Schema(STEPS)
    assert parsed.collectives.schema == pl.Schema(COLLECTIVES)
    assert parsed.threads.schema == pl.Schema(THREADS)
    assert parsed.process_groups.schema == pl.Schema(PROCESS_GROUPS)
    assert parsed.events.height > 0
    assert parsed.events["dur_ns"].min() >= 0
    assert parsed.threads.select("pid", "tid").is_duplicated().sum() == 0


def test_float_relative_ts_with_base_time() -> None:
    parsed = parse_trace(shared_path("traces/hta/nccl_parser_config_rank0.json.gz"))
    ev = parsed.events
    assert ev.height == 26933
    assert kinds(ev) == {
        "cpu_op": 14346,
        "gpu_user_annotation": 30,
        "kernel": 2700,
        "memcpy": 960,
        "memset": 114,
        "other": 1,
        "runtime": 8740,
        "user_annotation": 42,
    }
    assert span(ev) == (1716423322388068751, 1716423323101161005)
    assert gpu_count(ev) == 3774
    assert parsed.steps["step"].to_list() == [4, 5, 6]
    assert parsed.meta.base_time_ns == 1711964646000000000
    assert parsed.meta.ts_origin == "relative-base"
    assert (parsed.meta.rank, parsed.meta.world_size, parsed.meta.backend) == (0, 2, "nccl")
    assert parsed.meta.device_names[0] == "NVIDIA A100-PG509-200"
    assert parsed.process_groups.row(0) == ("0", "default_pg", "cuda:nccl", 2, [0, 1])


def test_nccl_kernels_take_collective_args_from_the_kernel() -> None:
    coll = parse_trace(shared_path("traces/hta/nccl_parser_config_rank0.json.gz")).collectives
    assert dict(coll.group_by("op").len().iter_rows()) == {"all_reduce": 15, "broadcast": 6}
    assert set(coll["source"]) == {"nccl_kernel"}
    first = coll.row(0, named=True)  # ncclKernel_Broadcast: 53120 Float elements
    assert (first["op"], first["bytes"], first["dtype"], first["group_size"]) == (
        "broadcast",
        212480,
        "float32",
        2,
    )
    assert (first["process_group"], first["pg_desc"]) == ("0", "default_pg")
    assert first["ts_unix_ns"] == 1711964646000000000 + 4458676423385774
    assert coll.row(1, named=True)["bytes"] == 53 * 8  # Long
    assert 6637568 * 4 in coll.filter(pl.col("op") == "all_reduce")["bytes"].to_list()


def test_absolute_float_epoch_ts_is_exact_to_the_ns() -> None:
    parsed = parse_trace(shared_path("traces/hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"))
    ev = parsed.events
    assert parsed.meta.ts_origin == "absolute-epoch"
    assert ev.height == 45420
    assert span(ev) == (1712195495406752797, 1712195495997096942)
    # "ts": 1712195495519689.047 in the file; float64 would give ...689.0469 or ...689.0470.
    assert ev.filter(pl.col("ts_unix_ns") == 1712195495519689047).height >= 1
    assert parsed.steps["step"].to_list() == [101, 102, 103, 104, 105]
    assert parsed.steps["ts_unix_ns"][0] == 1712195495502094565  # "ts": 1712195495502094.565
    assert parsed.meta.host == "twshared39868.02.pnb3.facebook.com"


def test_cpu_side_nccl_annotations_without_kernels() -> None:
    coll = parse_trace(shared_path("traces/hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")).collectives
    assert coll.height == 35
    assert set(coll["source"]) == {"cpu_annotation"}
    assert dict(coll.group_by("op").len().iter_rows()) == {"all_reduce": 25, "broadcast": 10}
    first_ar = coll.filter(pl.col("op") == "all_reduce").row(0, named=True)
    # enclosing record_param_comms: In msg nelems 2049000, dtype Float, Group size 1
    assert (first_ar["bytes"], first_ar["dtype"], first_ar["group_size"]) == (2049000 * 4, "float32", 1)
    assert first_ar["ts_unix_ns"] == 1712195495520882922  # the nccl:all_reduce annotation itself


def test_int_epoch_ts_two_steps_sendrecv_kernels() -> None:
    parsed = parse_trace(shared_path("traces/hta/pair_sampled_rank-0.json.gz"))
    assert parsed.events.height == 4811
    assert span(parsed.events) == (1682725897226747000, 1682725900594091000)
    assert parsed.steps["step"].to_list() == [551, 552]
    assert (parsed.meta.rank, parsed.meta.world_size) == (0, 128)
    coll = parsed.collectives
    assert coll.height == 10
    # SendRecv kernels: the op comes from the nccl:* annotation that holds the launch.
    assert dict(coll.group_by("op").len().iter_rows()) == {"all_to_all": 4, "all_reduce": 4, "all_gather": 2}
    assert coll.filter(pl.col("op") == "all_reduce")["bytes"][0] == 19618307 * 4
    assert coll.filter(pl.col("op") == "all_to_all")["bytes"][0] == 384 * 8
    assert coll.filter(pl.col("op") == "all_gather")["bytes"].null_count() == 2  # group size unknown


def test_bare_array_2020() -> None:
    parsed = parse_trace(shared_path("traces/kineto/resnet50_bare_array_2020.pt.trace.json.gz"))
    assert parsed.meta.layout == "bare-array"
    assert parsed.meta.rank is None and parsed.meta.device_names == ()
    assert kinds(parsed.events) == {
        "cpu_op": 42438,
        "kernel": 9538,
        "memcpy": 12,
        "memset": 377,
        "other": 1,
        "runtime": 10800,
    }
    assert span(parsed.events) == (1606910596288053000, 1606910597580318000)
    assert gpu_count(parsed.events) == 9927
    assert parsed.steps["step"].to_list() == [5, 6, 7, 8, 9, 10]


def test_legacy_categories_and_external_id_spelling() -> None:
    parsed = parse_trace(shared_path("traces/kineto/resnet50_v100_2021.pt.trace.json.gz"))
    assert kinds(parsed.events) == {
        "cpu_op": 23646,
        "kernel": 8772,
        "memcpy": 12,
        "memset": 312,
        "other": 1,
        "runtime": 11923,
    }
    gpu = parsed.events.filter(pl.col("kind") == "kernel")
    assert gpu["external_id"].null_count() == 0  # from args["external id"]
    assert gpu["launch_ts_unix_ns"].null_count() < gpu.height


def test_compute_properties() -> None:
    parsed = parse_trace(shared_path("traces/kineto/compute_properties_small.json.gz"))
    assert parsed.meta.device_names[0] == "Tesla V100-DGXS-32GB"
    assert parsed.events.height == 254
    assert parsed.steps["step"].to_list() == [2]
    assert parsed.steps["tid"].to_list() == ["24572"]


def test_mi250_no_distributed_info_and_text_stream() -> None:
    parsed = parse_trace(shared_path("traces/hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert parsed.meta.rank is None and parsed.meta.world_size is None
    assert parsed.meta.device_names[0] == "AMD Radeon Graphics"
    assert span(parsed.events) == (1739836029603018756, 1739836029612780634)
    assert gpu_count(parsed.events) == 16
    runtime = parsed.events.filter(pl.col("kind") == "runtime")
    assert runtime.filter(pl.col("name") == "hipMemcpyWithStream")["stream"].to_list() == [
        None,
        None,
    ]  # "0x0"
    # ProfilerStep#1 also exists as a gpu_user_annotation: not a step.
    assert parsed.steps["step"].to_list() == [1, 2]


def test_b200_vllm_process_groups_and_allgather() -> None:
    parsed = parse_trace(shared_path("traces/tracelens/b200_vllm_eager_rank0_of8.json.gz"))
    assert parsed.steps.height == 0
    assert parsed.process_groups.height == 15  # pg_config lists 15 of the pg_count=71 groups
    assert '"pg_count": 71' in parsed.meta.distributed_info_json
    assert (
        parsed.process_groups.filter(pl.col("process_group") == "70")["backend_config"][0]
        == "cpu:gloo,cuda:gloo"
    )
    coll = parsed.collectives.row(0, named=True)
    # Out msg nelems 201088 BFloat16 on group "3" of 8 ranks (nccl-tests: all_gather = output size)
    assert (coll["op"], coll["bytes"], coll["dtype"], coll["group_size"], coll["process_group"]) == (
        "all_gather",
        402176,
        "bfloat16",
        8,
        "3",
    )
    assert parsed.events.filter(pl.col("kind") == "cpu_op")["stream"].drop_nulls().len() == 1


def test_mi300_rccl_generic_kernels_link_to_record_param_comms() -> None:
    coll = parse_trace(shared_path("traces/tracelens/mi300_ddp_rank0_of8.json.gz")).collectives
    assert coll.height == 17
    assert dict(coll.group_by("op").len().iter_rows()) == {None: 5, "broadcast": 6, "all_reduce": 6}
    assert coll.filter(pl.col("op") == "all_reduce")["bytes"][0] == 2873320 * 2
    assert set(coll["group_size"]) == {8}


def test_gpu_only_trace_without_cpu_ops() -> None:
    parsed = parse_trace(shared_path("traces/tracelens/mi210_gpu_only.json.gz"))
    assert kinds(parsed.events) == {"kernel": 562, "other": 1, "runtime": 631}
    assert span(parsed.events) == (1766169255217913045, 1766169255224030950)
    kernels = parsed.events.filter(pl.col("kind") == "kernel")
    assert kernels["launch_ts_unix_ns"].null_count() == 0
    assert (kernels["launch_ts_unix_ns"] <= kernels["ts_unix_ns"]).all()
