"""parse_trace on the format variants of ../shared/data that test_kineto_real.py leaves out.

Every literal here was read from the raw file without tracehouse: python3's json module with
floats as Decimal (exact ns), run in ../shared/data/traces after this prelude:

    X='import gzip,json,sys,collections as C; from decimal import Decimal as D
    d=json.load(gzip.open(sys.argv[1]),parse_float=D); t=d["traceEvents"] if isinstance(d,dict) else d
    b=d.get("baseTimeNanoseconds",0) if isinstance(d,dict) else 0; x=[e for e in t if e.get("ph")=="X"]
    ns=lambda us: int(D(us)*1000)'
    CATS='print(len(x), C.Counter(e.get("cat") for e in x))'
    SPAN='print(b+min(ns(e["ts"]) for e in x), b+max(ns(e["ts"])+ns(e["dur"]) for e in x))'
    GPU='print(C.Counter((e["cat"],e["args"]["stream"]) for e in x
        if e["cat"].lower() in ("kernel","gpu_memcpy","gpu_memset","memcpy","memset")))'
    STEPS='print([(e["name"],e["cat"],e["pid"],e["tid"],b+ns(e["ts"]),ns(e["dur"])) for e in x
        if str(e.get("name")).startswith("ProfilerStep")])'
    META='print(json.dumps(d.get("distributedInfo")), d.get("baseTimeNanoseconds"),
        C.Counter(p["name"] for p in d.get("deviceProperties",[])))'
    SYNC='print(C.Counter((e["name"],e["tid"],e["args"]["stream"]) for e in x if e["cat"]=="cuda_sync"))'
    LAUNCH='r={e["args"]["correlation"]:e for e in x if e["cat"].lower() in ("cuda_runtime","cuda_driver")
        and "correlation" in e["args"]}; k=[e for e in x if e["cat"]=="kernel"]'

The comment above an assertion is the command, e.g. `python3 -c "$X; $CATS" FILE`. Categories are
mapped to kinds by hand (kineto_names: case-insensitive; `Trace`, the profiler's own span, is other).
"""

from __future__ import annotations

import polars as pl
from support.frames import gpu_count, kinds, span
from support.testdata import shared_path
from tracehouse.pipeline.parsers.kineto.parse import ParsedTrace, parse_trace

A100_X8 = ("NVIDIA A100-PG509-200",) * 8


def parse(relative: str) -> ParsedTrace:
    return parse_trace(shared_path(f"traces/{relative}"))


def gpu_streams(events: pl.DataFrame) -> dict[int, int]:
    gpu = events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    return dict(gpu.group_by("stream").len().sort("stream").iter_rows())


def sync_rows(events: pl.DataFrame) -> dict[tuple[str, str, int], int]:
    sync = events.filter(pl.col("kind") == "cuda_sync").group_by("name", "tid", "stream").len()
    return {(name, tid, stream): n for name, tid, stream, n in sync.iter_rows()}


def test_alexnet_cuda_sync_context_sync_on_stream_4294967295() -> None:
    parsed = parse("hta/alexnet_cuda_sync.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" hta/alexnet_cuda_sync.json.gz
    assert ev.height == 868
    assert kinds(ev) == {
        "cpu_op": 359,
        "cuda_sync": 41,
        "kernel": 79,
        "memcpy": 16,
        "memset": 3,
        "other": 1,
        "runtime": 361,
        "user_annotation": 8,
    }
    # python3 -c "$X; $SPAN" hta/alexnet_cuda_sync.json.gz  (int epoch µs, no baseTimeNanoseconds)
    assert span(ev) == (1695835542481129000, 1695835585939652000)
    assert (parsed.meta.base_time_ns, parsed.meta.ts_origin) == (None, "absolute-epoch")
    # python3 -c "$X; $SYNC" hta/alexnet_cuda_sync.json.gz: Context Sync has tid -1, stream 2^32-1
    assert sync_rows(ev) == {
        ("Context Sync", "-1", 4294967295): 5,
        ("Stream Sync", "7", 7): 16,
        ("Stream Wait Event", "7", 7): 16,
        ("Stream Wait Event", "20", 20): 4,
    }
    # python3 -c "$X; $GPU" hta/alexnet_cuda_sync.json.gz: cuda_sync rows carry a stream, not device work
    assert gpu_count(ev) == 98
    assert gpu_streams(ev) == {7: 91, 20: 7}
    assert parsed.steps.height == 0
    # python3 -c "$X; $META" hta/alexnet_cuda_sync.json.gz: distributedInfo is {"rank": 0} only
    assert (parsed.meta.rank, parsed.meta.world_size, parsed.meta.backend) == (0, None, None)
    assert parsed.meta.device_names == A100_X8
    assert parsed.process_groups.height == 0


def test_event_sync_multi_stream_syncs_on_stream_minus_one() -> None:
    parsed = parse("hta/event_sync_multi_stream.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" hta/event_sync_multi_stream.json.gz
    assert kinds(ev) == {"cpu_op": 6, "cuda_sync": 5, "kernel": 3, "memset": 3, "other": 1, "runtime": 39}
    # python3 -c "$X; $SPAN" hta/event_sync_multi_stream.json.gz
    assert span(ev) == (1712867402305721000, 1712867402368198000)
    # python3 -c "$X; $SYNC" hta/event_sync_multi_stream.json.gz: here Context Sync is stream -1
    assert sync_rows(ev) == {
        ("Context Sync", "-1", -1): 1,
        ("Event Sync", "-1", -1): 3,
        ("Stream Wait Event", "24", 24): 1,
    }
    # python3 -c "$X; $GPU" hta/event_sync_multi_stream.json.gz: one memset and one sgemm per stream
    assert gpu_streams(ev) == {20: 2, 24: 2, 28: 2}
    assert parsed.steps.height == 0
    # python3 -c "$X; $META" hta/event_sync_multi_stream.json.gz
    assert (parsed.meta.rank, parsed.meta.world_size) == (0, None)
    assert parsed.meta.device_names == A100_X8


def test_autograd_api_2021_has_no_profiler_step() -> None:
    parsed = parse("kineto/resnet50_autograd_api_2021.pt.trace.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" kineto/resnet50_autograd_api_2021.pt.trace.json.gz
    assert kinds(ev) == {
        "cpu_op": 33535,
        "kernel": 9329,
        "memcpy": 338,
        "memset": 466,
        "other": 1,
        "runtime": 15754,
    }
    # python3 -c "$X; $SPAN" kineto/resnet50_autograd_api_2021.pt.trace.json.gz
    assert span(ev) == (1610366387140419000, 1610366392436019000)
    # python3 -c "$X; $STEPS" kineto/resnet50_autograd_api_2021.pt.trace.json.gz prints []
    assert parsed.steps.height == 0
    assert ev.filter(pl.col("name").str.starts_with("ProfilerStep")).height == 0
    # python3 -c "$X; $GPU" kineto/resnet50_autograd_api_2021.pt.trace.json.gz: 13 streams
    assert gpu_count(ev) == 10133
    assert gpu_streams(ev) == {
        7: 9649,
        15: 205,
        16: 144,
        23: 1,
        24: 1,
        25: 1,
        26: 1,
        27: 103,
        28: 24,
        35: 1,
        36: 1,
        37: 1,
        38: 1,
    }
    # python3 -c "$X; $META" kineto/resnet50_autograd_api_2021.pt.trace.json.gz: null None Counter()
    assert (parsed.meta.rank, parsed.meta.device_names, parsed.meta.base_time_ns) == (None, (), None)


def test_h100_harness_cuda_12_9_relative_float_ts() -> None:
    parsed = parse("kineto/h100_harness_before_fix.json.gz")
    ev = parsed.events
    # python3 -c "$X; $META" kineto/h100_harness_before_fix.json.gz
    # (its cuda_runtime_version 12090 / cuda_driver_version 13000 have no place in TraceMeta)
    assert (parsed.meta.base_time_ns, parsed.meta.ts_origin) == (1775078550000000000, "relative-base")
    assert parsed.meta.device_names == ("NVIDIA H100",) * 8
    assert parsed.meta.rank is None
    # python3 -c "$X; $CATS" kineto/h100_harness_before_fix.json.gz
    assert kinds(ev) == {"cpu_op": 4, "cuda_sync": 2, "kernel": 1, "other": 1, "runtime": 1}
    # python3 -c "$X; $SPAN" kineto/h100_harness_before_fix.json.gz  ("ts": 88437691101.719, "dur": 0.300)
    assert span(ev) == (1775166987691101719, 1775166987691102019)
    # python3 -c "$X; print([(e['cat'],e['name'],e['pid'],e['tid'],b+ns(e['ts']),ns(e['dur'])) for e in x])" \
    #   kineto/h100_harness_before_fix.json.gz
    kernel = ev.filter(pl.col("kind") == "kernel").row(0, named=True)
    assert (kernel["ts_unix_ns"], kernel["dur_ns"], kernel["stream"]) == (1775166987691101749, 20, 1)
    assert kernel["launch_ts_unix_ns"] == 1775166987691101729  # cudaLaunchKernel, "ts": 88437691101.729
    # python3 -c "$X; $SYNC" kineto/h100_harness_before_fix.json.gz
    assert sync_rows(ev) == {("Event Sync", "1", -1): 1, ("Stream Wait Event", "1", 1): 1}
    trace_span = ev.filter(pl.col("cat") == "Trace").row(0, named=True)
    assert (trace_span["pid"], trace_span["tid"], trace_span["kind"]) == ("Spans", "Test trace", "other")
    assert parsed.steps.height == 0


def test_v100_dataloader4_2021_steps_on_the_operator_thread() -> None:
    parsed = parse("kineto/resnet50_v100_dataloader4_2021.pt.trace.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" kineto/resnet50_v100_dataloader4_2021.pt.trace.json.gz
    # (the 10982 "ph": "i" [memory] events are not complete events)
    assert ev.height == 41906
    assert kinds(ev) == {
        "cpu_op": 20562,
        "kernel": 8868,
        "memcpy": 12,
        "memset": 378,
        "other": 1,
        "runtime": 12085,
    }
    # python3 -c "$X; $SPAN" kineto/resnet50_v100_dataloader4_2021.pt.trace.json.gz
    assert span(ev) == (1623212388426602000, 1623212389273556000)
    # python3 -c "$X; $STEPS" kineto/resnet50_v100_dataloader4_2021.pt.trace.json.gz
    # (cat Operator, pid 5555 as a number, tid "5555" as a string)
    assert parsed.steps.rows() == [
        (5, 1623212388426996000, 181565000, "5555", "5555"),
        (6, 1623212388608626000, 123884000, "5555", "5555"),
        (7, 1623212388732580000, 126824000, "5555", "5555"),
        (8, 1623212388859473000, 126272000, "5555", "5555"),
        (9, 1623212388985809000, 163461000, "5555", "5555"),
        (10, 1623212389149340000, 116146000, "5555", "5555"),
    ]
    # python3 -c "$X; print(C.Counter(e['name'] for e in x if 'DataLoader' in e['name']))" \
    #   kineto/resnet50_v100_dataloader4_2021.pt.trace.json.gz
    loader = ev.filter(pl.col("name") == "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__")
    assert (loader.height, set(loader["kind"])) == (6, {"cpu_op"})
    # python3 -c "$X; $GPU" kineto/resnet50_v100_dataloader4_2021.pt.trace.json.gz
    assert gpu_streams(ev) == {7: 9258}
    # python3 -c "$X; $META" kineto/resnet50_v100_dataloader4_2021.pt.trace.json.gz
    assert parsed.meta.device_names == ("Tesla V100-DGXS-32GB",) * 4


def test_h100_bert_small_with_stack_flops_modules() -> None:
    parsed = parse("tracelens/h100_bert_small.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" tracelens/h100_bert_small.json.gz  (runtime: 110 cuda_runtime + 22 cuda_driver)
    assert kinds(ev) == {
        "cpu_op": 479,
        "gpu_user_annotation": 1,
        "kernel": 60,
        "memcpy": 1,
        "other": 1,
        "python_function": 1385,
        "runtime": 132,
        "user_annotation": 1,
    }
    # python3 -c "$X; $SPAN" tracelens/h100_bert_small.json.gz
    assert span(ev) == (1752830083332500684, 1752830083337467316)
    # python3 -c "$X; $META" tracelens/h100_bert_small.json.gz
    assert parsed.meta.base_time_ns == 1751410836000000000
    assert parsed.meta.device_names == ("NVIDIA H100 80GB HBM3",)
    # python3 -c "$X; $STEPS" tracelens/h100_bert_small.json.gz: the user_annotation is the step; its
    # gpu_user_annotation copy (pid 0, tid 7, 1752830083333430848) is not
    assert parsed.steps.rows() == [(6, 1752830083332972313, 4426114, "19392", "19392")]
    # python3 -c "$X; $LAUNCH; print(C.Counter(r[e['args']['correlation']]['name'] for e in k))" \
    #   tracelens/h100_bert_small.json.gz: 34 cudaLaunchKernel, 22 cuLaunchKernel, 4 cudaLaunchKernelExC
    kernels = ev.filter(pl.col("kind") == "kernel")
    launches = ev.filter(pl.col("kind") == "runtime").select("correlation", pl.col("name").alias("launch"))
    by_launch = kernels.join(launches, on="correlation").group_by("launch").len()
    assert dict(by_launch.iter_rows()) == {
        "cudaLaunchKernel": 34,
        "cuLaunchKernel": 22,
        "cudaLaunchKernelExC": 4,
    }
    assert kernels["launch_ts_unix_ns"].null_count() == 0
    assert gpu_count(ev) == 61


def test_mi300_resnet18_window_without_steps() -> None:
    parsed = parse("tracelens/mi300_resnet18_window.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" tracelens/mi300_resnet18_window.json.gz
    assert kinds(ev) == {
        "cpu_op": 6175,
        "gpu_user_annotation": 5,
        "kernel": 2360,
        "memcpy": 5,
        "memset": 10,
        "other": 1,
        "python_function": 6649,
        "runtime": 5587,
        "user_annotation": 10,
    }
    # python3 -c "$X; $SPAN" tracelens/mi300_resnet18_window.json.gz
    assert span(ev) == (1776384066305009771, 1776384069698270910)
    # python3 -c "$X; print(C.Counter((e['cat'],e['name']) for e in x if 'annotation' in e['cat']))" \
    #   tracelens/mi300_resnet18_window.json.gz: five optimizer steps, no ProfilerStep
    assert parsed.steps.height == 0
    assert ev.filter(pl.col("name") == "Optimizer.step#SGD.step")["kind"].value_counts(sort=True).rows() == [
        ("user_annotation", 5),
        ("gpu_user_annotation", 5),
    ]
    # python3 -c "$X; $GPU" tracelens/mi300_resnet18_window.json.gz
    assert gpu_streams(ev) == {0: 2375}
    # python3 -c "$X; $META" tracelens/mi300_resnet18_window.json.gz
    assert parsed.meta.base_time_ns == 1775078550000000000
    assert parsed.meta.device_names == ("AMD Instinct MI300X",) * 8


def test_mi300_torch_compile_triton_kernels_launched_by_hip_module_launch() -> None:
    parsed = parse("tracelens/mi300_torch_compile_triton.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" tracelens/mi300_torch_compile_triton.json.gz
    assert kinds(ev) == {
        "cpu_op": 41,
        "gpu_user_annotation": 1,
        "kernel": 12,
        "other": 1,
        "runtime": 59,
        "user_annotation": 1,
    }
    # python3 -c "$X; $SPAN" tracelens/mi300_torch_compile_triton.json.gz
    assert span(ev) == (1778681579046038437, 1778681579059161623)
    # python3 -c "$X; $LAUNCH; print([(e['name'], b+ns(e['ts']), r[e['args']['correlation']]['name'],
    #     b+ns(r[e['args']['correlation']]['ts'])) for e in k if e['name'].startswith('triton_')])" \
    #   tracelens/mi300_torch_compile_triton.json.gz  (all four launched by hipModuleLaunchKernel)
    triton = ev.filter(pl.col("name").str.starts_with("triton_") & (pl.col("kind") == "kernel"))
    assert triton.select("name", "ts_unix_ns", "launch_ts_unix_ns").rows() == [
        ("triton_red_fused_add_mean_mul_pow_rsqrt_0", 1778681579046460717, 1778681579046433962),
        ("triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1", 1778681579052467997, 1778681579046801207),
        ("triton_poi_fused__unsafe_view_mul_silu_2", 1778681579056307818, 1778681579047014514),
        ("triton_poi_fused__unsafe_view_add_3", 1778681579058868901, 1778681579047076817),
    ]
    assert parsed.steps.height == 0
    # python3 -c "$X; $META" tracelens/mi300_torch_compile_triton.json.gz
    assert parsed.meta.base_time_ns == 1775078550000000000
    assert parsed.meta.device_names == ("AMD Instinct MI300X",)


def test_mi300_sglang_decode_mixed_gloo_and_nccl_groups() -> None:
    parsed = parse("tracelens/mi300_sglang_decode.json.gz")
    # python3 -c "$X; $META" tracelens/mi300_sglang_decode.json.gz
    assert (parsed.meta.rank, parsed.meta.world_size, parsed.meta.backend) == (0, 1, "nccl")
    assert '"pg_count": 7' in parsed.meta.distributed_info_json
    assert '"nccl_version": "2.27.7"' in parsed.meta.distributed_info_json
    assert parsed.process_groups.rows() == [
        ("0", "default_pg", "cuda:nccl", 1, [0]),
        ("1", "undefined", "cuda:nccl", 1, [0]),
        ("2", "undefined", "cpu:gloo,cuda:gloo", 1, [0]),
        ("3", "undefined", "cuda:nccl", 1, [0]),
        ("4", "undefined", "cpu:gloo,cuda:gloo", 1, [0]),
        ("5", "undefined", "cuda:nccl", 1, [0]),
        ("6", "undefined", "cpu:gloo,cuda:gloo", 1, [0]),
    ]
    assert parsed.meta.device_names == ("AMD Instinct MI300X",)
    ev = parsed.events
    # python3 -c "$X; $CATS" tracelens/mi300_sglang_decode.json.gz  (no Trace span: no "other")
    assert kinds(ev) == {
        "cpu_op": 61,
        "kernel": 555,
        "memcpy": 3,
        "python_function": 821,
        "runtime": 29,
        "user_annotation": 2,
    }
    # python3 -c "$X; $SPAN" tracelens/mi300_sglang_decode.json.gz
    assert span(ev) == (1779988464216204635, 1779988464690035167)
    # python3 -c "$X; $GPU" tracelens/mi300_sglang_decode.json.gz
    assert gpu_streams(ev) == {2: 2, 3: 556}
    # python3 -c "$X; print([e['name'] for e in x if 'ccl' in e['name'].lower()
    #     or e['name'].startswith(('gloo:','c10d::','record_param_comms'))])" \
    #   tracelens/mi300_sglang_decode.json.gz  (prints [])
    assert parsed.collectives.height == 0
    assert parsed.steps.height == 0


def test_param_linear_rtx2080ti_ac2g_flows_no_steps() -> None:
    parsed = parse("param/linear_rtx2080ti.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" param/linear_rtx2080ti.json.gz
    # python3 -c "$X; print(C.Counter((e['ph'],e.get('cat')) for e in t))" param/linear_rtx2080ti.json.gz
    # (86859 entries: 61950 X, 14515 f + 10356 s ac2g flows, 36 M, 2 i; only X are events)
    assert ev.height == 61950
    assert kinds(ev) == {
        "cpu_op": 36998,
        "kernel": 8716,
        "memset": 1640,
        "other": 1,
        "runtime": 14515,
        "user_annotation": 80,
    }
    # python3 -c "$X; $SPAN" param/linear_rtx2080ti.json.gz
    assert span(ev) == (1689180447559362000, 1689180449563436000)
    # python3 -c "$X; $GPU" param/linear_rtx2080ti.json.gz
    assert gpu_streams(ev) == {7: 10356}
    # python3 -c "$X; $LAUNCH; print(sum(e['cat'] in ('kernel','gpu_memcpy','gpu_memset')
    #     and e['args']['correlation'] in r for e in x))" param/linear_rtx2080ti.json.gz
    # (10356: as many as the ac2g flow starts)
    gpu = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert gpu["launch_ts_unix_ns"].is_not_null().sum() == 10356
    # python3 -c "$X; $STEPS" param/linear_rtx2080ti.json.gz prints []
    assert parsed.steps.height == 0
    # python3 -c "$X; print(C.Counter(e['name'] for e in x if e['cat']=='user_annotation'))" \
    #   param/linear_rtx2080ti.json.gz: 40 Optimizer.step#SGD.step, 40 Optimizer.zero_grad#SGD.zero_grad
    assert ev.filter(pl.col("name") == "Optimizer.step#SGD.step").height == 40
    # python3 -c "$X; $META" param/linear_rtx2080ti.json.gz
    assert (parsed.meta.rank, parsed.meta.base_time_ns) == (None, None)
    assert parsed.meta.device_names == ("NVIDIA GeForce RTX 2080 Ti",) * 8


def test_param_resnet_rtx2080ti_three_streams_no_steps() -> None:
    parsed = parse("param/resnet_rtx2080ti.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" param/resnet_rtx2080ti.json.gz
    assert kinds(ev) == {
        "cpu_op": 39416,
        "kernel": 9628,
        "memcpy": 123,
        "memset": 362,
        "other": 1,
        "runtime": 25928,
        "user_annotation": 90,
    }
    # python3 -c "$X; $SPAN" param/resnet_rtx2080ti.json.gz
    assert span(ev) == (1689179597340511000, 1689179613512832000)
    # python3 -c "$X; $GPU" param/resnet_rtx2080ti.json.gz
    assert gpu_streams(ev) == {7: 10111, 20: 1, 36: 1}
    # python3 -c "$X; $LAUNCH; print(sum(e['cat'] in ('kernel','gpu_memcpy','gpu_memset')
    #     and e['args']['correlation'] in r for e in x))" param/resnet_rtx2080ti.json.gz
    assert gpu_count(ev) == 10113
    gpu = ev.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
    assert gpu["launch_ts_unix_ns"].is_not_null().sum() == 10113
    # python3 -c "$X; $STEPS" param/resnet_rtx2080ti.json.gz prints []
    assert parsed.steps.height == 0
    # python3 -c "$X; $META" param/resnet_rtx2080ti.json.gz
    assert parsed.meta.device_names == ("NVIDIA GeForce RTX 2080 Ti",) * 8


def test_pair_sampled_rank1_float_durations_and_sendrecv_collectives() -> None:
    parsed = parse("hta/pair_sampled_rank-1.json.gz")
    ev = parsed.events
    # python3 -c "$X; $CATS" hta/pair_sampled_rank-1.json.gz
    assert kinds(ev) == {
        "cpu_op": 2302,
        "kernel": 1104,
        "memcpy": 40,
        "memset": 10,
        "other": 1,
        "runtime": 1154,
        "user_annotation": 65,
    }
    # python3 -c "$X; $SPAN" hta/pair_sampled_rank-1.json.gz  (int epoch µs "ts", float "dur")
    assert span(ev) == (1682725897227300000, 1682725900593698000)
    # python3 -c "$X; $STEPS" hta/pair_sampled_rank-1.json.gz  ("dur": 607904.0 and 630639.0)
    assert parsed.steps.rows() == [
        (551, 1682725898079484000, 607904000, "4045", "4045"),
        (552, 1682725898687438000, 630639000, "4045", "4045"),
    ]
    # python3 -c "$X; $META" hta/pair_sampled_rank-1.json.gz
    # prints {"backend": "nccl", "rank": 1, "world_size": 128} None Counter()
    assert (parsed.meta.rank, parsed.meta.world_size, parsed.meta.backend) == (1, 128, "nccl")
    assert parsed.meta.device_names == ()
    # python3 -c "$X; $GPU" hta/pair_sampled_rank-1.json.gz
    assert gpu_streams(ev) == {7: 1002, 23: 126, 25: 16, 84: 8, 203: 2}
    # python3 -c "$X; $LAUNCH; a=[e for e in x if e['name'].startswith('nccl:')]; print(sorted(
    #     (b+ns(e['ts']), [(n['name'], n['args']['Input Dims'][0][0], n['args']['Input type'][0])
    #      for n in a if n['tid']==c['tid'] and n['ts']<=c['ts']<n['ts']+n['dur']])
    #     for e in k if e['name'].startswith('nccl') for c in [r[e['args']['correlation']]]))" \
    #   hta/pair_sampled_rank-1.json.gz  (the nccl:* annotation holding each kernel's launch)
    # bytes = elements x width of the annotation's type; _all_gather_base: group size unknown -> NULL
    coll = parsed.collectives.sort("ts_unix_ns")
    assert coll.select("ts_unix_ns", "op", "bytes", "dtype").rows() == [
        (1682725898129911000, "all_to_all", 339738624, "uint8"),
        (1682725898234342000, "all_to_all", 2846720 * 4, "int32"),
        (1682725898298964000, "all_reduce", 19618307 * 4, "float32"),
        (1682725898512687000, "all_reduce", 26258430 * 4, "float32"),
        (1682725898585405000, "all_gather", None, "int8"),
        (1682725898701451000, "all_to_all", 384 * 8, "int64"),
        (1682725898899992000, "all_reduce", 19618307 * 4, "float32"),
        (1682725899038545000, "all_to_all", 394073856, "uint8"),
        (1682725899168655000, "all_reduce", 5716654 * 4, "float32"),
        (1682725899187182000, "all_gather", None, "int8"),
    ]
