"""rank_summary against Holistic Trace Analysis on every real GPU trace without cuda_sync events.

METHODOLOGY's cross-check: compute, idle and overlap % must equal HTA's temporal breakdown and
comm/comp overlap (include_last_profiler_step=True, HTA_DISABLE_NS_ROUNDING=1) within 0.1 % of
the span. Where a trace differs by definition, EXPLAINED names the cause; the test then applies
HTA's definition to the events (and only that) and requires agreement again.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import pytest
from support.analysis_rawdb import parsed_db, rows
from support.hta_definitions import as_hta_sees_it
from support.testdata import SHARED_DATA, shared_path

pytestmark = [pytest.mark.shared_data, pytest.mark.slow]

TRACES = [
    "hta/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/nccl_parser_config_rank0.json.gz",
    "hta/pair_sampled_rank-0.json.gz",
    "hta/pair_sampled_rank-1.json.gz",
    "hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "kineto/compute_properties_small.json.gz",
    "kineto/resnet50_autograd_api_2021.pt.trace.json.gz",
    "kineto/resnet50_v100_2021.pt.trace.json.gz",
    "kineto/resnet50_v100_dataloader4_2021.pt.trace.json.gz",
    "param/linear_rtx2080ti.json.gz",
    "param/resnet_rtx2080ti.json.gz",
    "tracelens/b200_vllm_eager_rank0_of8.json.gz",
    "tracelens/h100_bert_small.json.gz",
    "tracelens/mi210_gpu_only.json.gz",
    "tracelens/mi300_ddp_rank0_of8.json.gz",
    "tracelens/mi300_resnet18_window.json.gz",
    "tracelens/mi300_sglang_decode.json.gz",
    "tracelens/mi300_torch_compile_triton.json.gz",
]
# Left out, with the reason: HTA cannot load a bare-array trace; the others hold cuda_sync events.
NOT_COMPARED = {
    "kineto/resnet50_bare_array_2020.pt.trace.json.gz": "HTA 0.5 cannot load a bare-array trace",
    "hta/alexnet_cuda_sync.json.gz": "cuda_sync events",
    "hta/event_sync_multi_stream.json.gz": "cuda_sync events",
    "kineto/h100_harness_before_fix.json.gz": "cuda_sync events",
    # Its device activity is `mtia_ccp_events`: no kernel, memcpy or memset category, so the
    # METHODOLOGY's GPU rule finds no device events and there are no totals to compare.
    "hta/mtia_trace_single_rank.json.gz": "MTIA device activity, not a GPU event category",
}
# Differences by definition (METHODOLOGY cross-check paragraph, MANIFEST "Known quirks").
EXPLAINED = {
    "tracelens/mi300_ddp_rank0_of8.json.gz": "launchless",  # HTA drops launch-less events (>= 2 steps)
    "tracelens/b200_vllm_eager_rank0_of8.json.gz": "stream_cpu_op",  # a cpu_op with a stream arg
    "tracelens/mi300_torch_compile_triton.json.gz": "stream_cpu_op",  # 4 cpu_ops with a stream arg
    "hta/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": "float64",  # absolute-epoch float ts
}
FLOAT64_SLACK_US = 0.25 * 4  # HTA's float64 µs lose up to 0.25 µs per boundary; a few boundaries


def hta_figures(path: Path) -> dict:
    """HTA's compute, idle, span and overlap % for one single-rank trace."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        os.symlink(path, Path(tmp) / path.name)
        analysis = TraceAnalysis(trace_dir=tmp, include_last_profiler_step=True)
        temporal = analysis.get_temporal_breakdown(visualize=False).iloc[0]
        overlap = analysis.get_comm_comp_overlap(visualize=False).iloc[0]
    ratio = overlap.get("comp_comm_overlap_ratio", overlap.iloc[-1] / 100)
    return {
        "compute": float(temporal["compute_time(us)"]),
        "idle": float(temporal["idle_time(us)"]),
        "span": float(temporal["kernel_time(us)"]),
        "overlap_pct": float(ratio) * 100,
    }


@pytest.fixture(scope="module")
def hta_results(request) -> dict:
    """HTA figures per trace, cached between runs (HTA takes ~45 s for all of them)."""
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    out = {}
    for rel in TRACES:
        path = shared_path(f"traces/{rel}")
        key = f"tracehouse/hta05/{rel}/{path.stat().st_size}"
        value = cache.get(key, None) if cache else None
        if value is None:
            value = hta_figures(path)
            if cache:
                cache.set(key, value)
        out[rel] = value
    return out


def ours(rel: str, hook=None) -> dict:
    from tracehouse.pipeline.parsers.kineto.parse import parse_trace

    parsed = parse_trace(SHARED_DATA / "traces" / rel)
    con = parsed_db([(parsed, {"study": "x", "run_id": "x", "rank": 0})], events_hook=hook)
    return rows(con, "SELECT span_us, compute_us, idle_us, overlap_pct FROM rank_summary")[0]


def assert_agrees(got: dict, hta: dict, tolerance_us: float) -> None:
    assert abs(got["span_us"] - hta["span"]) <= tolerance_us
    assert abs(got["compute_us"] - hta["compute"]) <= tolerance_us
    assert abs(got["idle_us"] - hta["idle"]) <= tolerance_us
    if got["overlap_pct"] is None:  # no communication: HTA divides 0 by 0
        assert math.isnan(hta["overlap_pct"])
    else:  # 0.1 % of the span, expressed on the overlapped time
        assert abs(got["overlap_pct"] - hta["overlap_pct"]) <= 0.1 or (
            abs(got["overlap_pct"] - hta["overlap_pct"]) / 100 * got["span_us"] <= tolerance_us
        )


@pytest.mark.parametrize("rel", [t for t in TRACES if t not in EXPLAINED])
def test_rank_summary_equals_hta(rel, hta_results):
    got = ours(rel)
    assert_agrees(got, hta_results[rel], tolerance_us=0.001 * got["span_us"])


@pytest.mark.parametrize("rel", sorted(EXPLAINED))
def test_explained_differences_vanish_under_htas_definition(rel, hta_results):
    cause, hta = EXPLAINED[rel], hta_results[rel]
    if cause == "float64":
        got = ours(rel)  # exact ns on our side; HTA's float64 µs are off by < 0.25 µs per boundary
        assert_agrees(got, hta, tolerance_us=FLOAT64_SLACK_US)
        assert got["idle_us"] != hta["idle"]  # the rounding really shows on this trace
        return
    direct = ours(rel)
    # the cause is real: at least 1 µs of difference before HTA's definition is applied ...
    assert max(abs(direct["compute_us"] - hta["compute"]), abs(direct["span_us"] - hta["span"])) > 1.0
    # ... and after applying it (only it) the figures agree to 0.1 % of the span, and compute to 0.01 µs
    adjusted = ours(rel, as_hta_sees_it(cause))
    assert_agrees(adjusted, hta, tolerance_us=0.001 * direct["span_us"])
    assert abs(adjusted["compute_us"] - hta["compute"]) <= 0.01


def test_every_shared_trace_is_compared_or_excused(shared_data):
    present = {
        str(p.relative_to(shared_data / "traces")) for p in (shared_data / "traces").rglob("*.json.gz")
    }
    assert present == set(TRACES) | set(NOT_COMPARED)
