"""Nothing silently missing: every rank without a breakdown has its reason in trace_coverage, and
ingest warns of it (and of activity the breakdown cannot count) in the summary and --json."""

from __future__ import annotations

import json

import duckdb
import pytest
from support.tracebuilder import _x, cpu_op, kernel, runtime, step, write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.warehouse.database import connect

BASE = 1_700_000_000 * 10**9


def coverage(wh) -> dict[int, tuple]:
    with duckdb.connect(str(wh / "tracehouse.duckdb"), read_only=True) as c:
        rows = c.sql(
            "SELECT rank, rule, step_windows, n_device_events, n_streamless_device_events, "
            "unknown_categories, reason, warning FROM trace_coverage"
        ).fetchall()
    return {r[0]: r[1:] for r in rows}


def ingest_json(tmp_path, capsys, traces: dict[int, list[dict]]) -> tuple[dict, str]:
    run = tmp_path / "run"
    run.mkdir()
    for rank, events in traces.items():
        write_trace(run / f"r{rank}.json", events, base_time_ns=BASE, distributed_info={"rank": rank})
    assert main(["ingest", str(run), "--warehouse", str(tmp_path / "wh"), "--study", "s", "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


GPU_STEP = [
    step(1, 0, 100),
    runtime("cudaLaunchKernel", 10, 5, correlation=1),
    kernel("gemm", 20, 30, correlation=1),
]
STREAMLESS = [kernel("gemm", 20, 30, stream=None), kernel("copy", 60, 5, stream=None)]


def test_each_reason_for_no_breakdown(tmp_path, capsys):
    summary, err = ingest_json(
        tmp_path,
        capsys,
        {
            0: GPU_STEP,  # a breakdown by the GPU rule
            1: [cpu_op("aten::mm", 0, 50)],  # no kernels, no ProfilerStep
            2: STREAMLESS,  # kernels without a stream arg, no ProfilerStep
            3: [_x("mtia_ccp_events", "mtia_kernel", 10, 20, 1, 1, None)] * 3,  # an unknown device kind
        },
    )
    got = coverage(tmp_path / "wh")
    assert got[0] == ("gpu", 1, 1, 0, None, None, None)
    assert got[1] == (None, 0, 0, 0, None, "no device events and no ProfilerStep: no breakdown", got[1][-2])
    assert got[2][:4] == (None, 0, 0, 2)
    assert (
        got[2][5]
        == "2 kernel/memcpy/memset events carry no stream arg, so none is device activity: no breakdown"
    )
    assert got[3][4] == "mtia_ccp_events (3 events)"
    assert got[3][5] == (
        "no device events; device activity of kinds tracehouse does not know: "
        "mtia_ccp_events (3 events): no breakdown"
    )
    expected = [f"rank {r} of run s/run: {got[r][5]}" for r in (1, 2, 3)]
    assert summary["warnings"] == expected
    assert [line for line in err.splitlines() if "warning:" in line] == [
        f"tracehouse ingest: warning: {w}" for w in expected
    ]


def test_a_breakdown_that_leaves_unknown_activity_uncounted_is_warned_of(tmp_path, capsys):
    events = [step(1, 0, 100), cpu_op("aten::mm", 10, 40), _x("mtia_ccp_events", "k", 10, 20, 1, 1, None)]
    summary, _ = ingest_json(tmp_path, capsys, {0: events})
    rule, windows, _, _, unknown, reason, warning = coverage(tmp_path / "wh")[0]
    assert (rule, windows, unknown, reason) == ("cpu", 1, "mtia_ccp_events (1 events)", None)
    assert warning == (
        "events of kinds tracehouse does not know are not counted as device activity: "
        "mtia_ccp_events (1 events); the breakdown uses the cpu rule"
    )
    assert summary["warnings"] == [f"rank 0 of run s/run: {warning}"]


def test_streamless_kernels_beside_a_profiler_step_are_warned_of(tmp_path, capsys):
    summary, _ = ingest_json(
        tmp_path, capsys, {0: [step(1, 0, 100), cpu_op("aten::mm", 10, 40), *STREAMLESS]}
    )
    rule, windows, _, streamless, _, reason, warning = coverage(tmp_path / "wh")[0]
    assert (rule, windows, streamless, reason) == ("cpu", 1, 2, None)
    assert warning == (
        "2 kernel/memcpy/memset events carry no stream arg and are not counted as device activity; "
        "the breakdown uses the cpu rule"
    )
    assert summary["warnings"] == [f"rank 0 of run s/run: {warning}"]


def test_only_this_ingests_traces_are_warned_of(tmp_path, capsys):
    ingest_json(tmp_path, capsys, {1: [cpu_op("aten::mm", 0, 50)]})
    other = tmp_path / "other"
    other.mkdir()
    write_trace(other / "r0.json", GPU_STEP, base_time_ns=BASE, distributed_info={"rank": 0})
    assert main(["ingest", str(other), "--warehouse", str(tmp_path / "wh"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []


@pytest.mark.slow
def test_the_real_mtia_trace_is_named(shared_data, tmp_path, capsys):
    path = shared_data / "traces/hta/mtia_trace_single_rank.json.gz"
    args = ["ingest", str(path), "--warehouse", str(tmp_path / "wh"), "--run", "mtia", "--rank", f"{path}=0"]
    assert main([*args, "--json"]) == 0
    [warning] = json.loads(capsys.readouterr().out)["warnings"]
    # counts read from the raw JSON: zcat FILE | python -c "...Counter(e.get('cat') ...)"
    assert "mtia_ccp_events (25,814 events), mtia_runtime (3,453 events)" in warning


def test_analyze_prints_the_same_warnings(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    write_trace(run / "r0.json", GPU_STEP, base_time_ns=BASE, distributed_info={"rank": 0})
    write_trace(run / "r1.json", [cpu_op("aten::mm", 0, 50)], base_time_ns=BASE, distributed_info={"rank": 1})
    args = [
        "analyze",
        str(run),
        "--warehouse",
        str(tmp_path / "wh"),
        "--study",
        "s",
        "-o",
        str(tmp_path / "r.html"),
    ]
    assert main(args) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert warnings == [
        "tracehouse analyze: warning: rank 1 of run s/run: no device events and no ProfilerStep: no breakdown"
    ]


def op_coverage(wh) -> dict[int, tuple]:
    with connect(wh, read_only=True) as c:
        rows = c.sql(
            "SELECT rank, n_ops, n_ops_with_shapes, n_ops_in_modules, n_op_launches, n_linked_launches, "
            "n_memory_events, has_shapes, has_modules, has_memory, op_gaps FROM trace_coverage"
        ).fetchall()
        linked = c.sql(
            "SELECT l.rank, l.name, o.name, o.module FROM op_launches AS l "
            "LEFT JOIN ops AS o ON l.content_hash = o.content_hash AND l.op_id = o.op_id"
        ).fetchall()
    return {r[0]: r[1:] for r in rows}, linked


MODULE = {
    "ph": "X",
    "cat": "python_function",
    "name": "nn.Module: Net_0",
    "pid": 100,
    "tid": 100,
    "ts": 0,
    "dur": 90,
}
MEMORY = {"ph": "i", "s": "t", "name": "[memory]", "pid": 100, "tid": 100, "ts": 5, "args": {"Bytes": 8}}


def test_op_coverage_says_what_each_rank_lacks(tmp_path, capsys):
    shaped = cpu_op("aten::mm", 5, 40, args={"Input Dims": [[2, 3], [3, 4]]})
    ingest_json(
        tmp_path,
        capsys,
        {
            0: [MODULE, shaped, *GPU_STEP, MEMORY],  # everything: shapes, a module, memory, linked
            1: [cpu_op("aten::mm", 0, 50)],  # an op without shapes, no module, no memory
            2: STREAMLESS,  # no host ops; two GPU events without a launch
        },
    )
    got, linked = op_coverage(tmp_path / "wh")
    assert got[0] == (3, 1, 2, 1, 1, 1, True, True, True, None)  # ProfilerStep#1 is an op (user_annotation)
    assert got[1] == (
        1, 0, 0, 0, 0, 0, False, False, False,
        "no input shapes (profiled without record_shapes); no module paths (profiled without with_modules); "
        "no memory events (profiled without profile_memory)",
    )  # fmt: skip
    assert got[2][:9] == (0, 0, 0, 2, 0, 0, False, False, False)
    assert got[2][9] == (
        "no host ops (no cpu_op events); 2 of 2 GPU events not linked to a host op; "
        "no memory events (profiled without profile_memory)"
    )
    assert sorted(linked, key=str) == sorted(
        [(0, "gemm", "aten::mm", "Net_0"), (2, "gemm", None, None), (2, "copy", None, None)], key=str
    )
