"""OPS, OP_LAUNCHES and MEMORY_EVENTS on real traces, against independent oracles.

* The tree: a monotonic stack over each thread's host events in thread order (pop while the top
  ends earlier; the top left is the parent), written here in plain Python, event by event.
* The links: per GPU event, the runtime call with its correlation (earliest), then the cpu_op on
  that call's thread whose interval holds it and starts last (brute force over that thread).
* The counts: read from the JSON with the standard library (ops, shapes, modules, memory events).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from support.testdata import SAMPLE_TRACES, shared_path
from tracehouse.pipeline.parsers.kineto.ops import HOST_KINDS
from tracehouse.pipeline.parsers.kineto.parse import parse_trace

# Shared trace -> (ops inside an nn.Module event, memory events), counted from the JSON below too.
SHARED = {
    "tracelens/h100_bert_small.json.gz": "modules and memory",
    "tracelens/mi300_ddp_rank0_of8.json.gz": "modules, backward kernels",
    "tracelens/mi300_resnet18_window.json.gz": "modules and memory",
    "kineto/resnet50_v100_2021.pt.trace.json.gz": "2021 categories, External id links, memory",
    "hta/mtia_trace_single_rank.json.gz": "a call tree that does not nest cleanly",
    "tracelens/b200_vllm_eager_rank0_of8.json.gz": "modules, inference",
}
# What the JSON holds (counted by `json_facts`; pinned here so a parser change cannot move both).
MODULE_EVENTS = {
    "tracelens/h100_bert_small.json.gz": 84,
    "tracelens/mi300_ddp_rank0_of8.json.gz": 450,
    "tracelens/mi300_resnet18_window.json.gz": 380,
    "kineto/resnet50_v100_2021.pt.trace.json.gz": 0,
    "hta/mtia_trace_single_rank.json.gz": 0,
    "tracelens/b200_vllm_eager_rank0_of8.json.gz": 436,
}
MEMORY_EVENTS = {
    "tracelens/h100_bert_small.json.gz": 236,
    "tracelens/mi300_ddp_rank0_of8.json.gz": 0,
    "tracelens/mi300_resnet18_window.json.gz": 210,
    "kineto/resnet50_v100_2021.pt.trace.json.gz": 12838,
    "hta/mtia_trace_single_rank.json.gz": 0,
    "tracelens/b200_vllm_eager_rank0_of8.json.gz": 0,
}
SAMPLE = SAMPLE_TRACES / "tiny-cpu-gloo" / "ddp-ws2" / "rank0.pt.trace.json.gz"


def json_facts(path: Path) -> dict[str, int]:
    """Counts read from the file with json: host ops, those with Input Dims, module and memory events."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    kinds = {"cpu_op", "operator", "python_function", "user_annotation"}
    host = [
        e
        for e in events
        if e.get("ph") == "X" and str(e.get("cat")).lower() in kinds and e.get("dur", 0) >= 0
    ]
    return {
        "ops": len(host),
        "shapes": sum("Input Dims" in (e.get("args") or {}) for e in host),
        "modules": sum(str(e.get("name")).startswith("nn.Module: ") for e in host),
        "memory": sum(e.get("ph") == "i" and e.get("name") == "[memory]" for e in events),
    }


def stack_parents(events: pl.DataFrame) -> dict[int, int | None]:
    """_row -> parent _row: the monotonic stack, per thread, over events in thread order."""
    parents: dict[int, int | None] = {}
    ordered = events.with_columns((pl.col("ts_unix_ns") + pl.col("dur_ns")).alias("end")).sort(
        ["pid", "tid", "ts_unix_ns", "end", "_row"], descending=[False, False, False, True, False]
    )
    stack: list[tuple[int, int]] = []
    thread = object()
    for row, pid, tid, end in ordered.select("_row", "pid", "tid", "end").iter_rows():
        if (pid, tid) != thread:
            stack, thread = [], (pid, tid)
        while stack and stack[-1][1] < end:
            stack.pop()
        parents[row] = stack[-1][0] if stack else None
        stack.append((row, end))
    return parents


def host_events(path: Path) -> pl.DataFrame:
    """The complete events with their _row (index among complete events), as op_id numbers them."""
    return parse_trace(path).events.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64))


@pytest.fixture(scope="module", params=sorted(SHARED))
def shared(request: pytest.FixtureRequest) -> tuple[str, Path]:
    return request.param, shared_path(f"traces/{request.param}")


def test_counts_match_the_json(shared: tuple[str, Path]) -> None:
    name, path = shared
    parsed, facts = parse_trace(path), json_facts(path)
    assert parsed.ops.height == facts["ops"]
    assert parsed.ops["input_dims"].is_not_null().sum() == facts["shapes"]
    assert parsed.ops["name"].str.starts_with("nn.Module: ").sum() == facts["modules"] == MODULE_EVENTS[name]
    assert parsed.memory_events.height == facts["memory"] == MEMORY_EVENTS[name]
    assert (parsed.ops["module"].is_not_null().sum() > 0) == (facts["modules"] > 0)
    assert (
        parsed.op_launches.height
        == parsed.events.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"])).height
    )


def test_tree_equals_the_stack_oracle(shared: tuple[str, Path]) -> None:
    _, path = shared
    parsed = parse_trace(path)
    if parsed.meta.negative_dur_events:
        pytest.skip("op_id counts dropped events too; the oracle below numbers kept ones")
    events = host_events(path)
    host = events.filter(pl.col("kind").is_in([*HOST_KINDS, "runtime"]))
    raw = stack_parents(host)
    is_op = dict(host.select("_row", pl.col("kind").is_in(HOST_KINDS)).iter_rows())

    def op_parent(row: int) -> int | None:
        up = raw[row]
        while up is not None and not is_op[up]:
            up = raw[up]
        return up

    expected = {row: op_parent(row) for row in raw if is_op[row]}
    assert dict(parsed.ops.select("op_id", "parent_id").iter_rows()) == expected
    depth = {}
    for row in expected:
        d, up = 0, expected[row]
        while up is not None:
            d, up = d + 1, expected[up]
        depth[row] = d
    assert dict(parsed.ops.select("op_id", "depth").iter_rows()) == depth


def test_links_equal_the_brute_force(shared: tuple[str, Path]) -> None:
    _, path = shared
    parsed = parse_trace(path)
    if parsed.meta.negative_dur_events:
        pytest.skip("op_id counts dropped events too; the oracle below numbers kept ones")
    events = host_events(path).with_columns((pl.col("ts_unix_ns") + pl.col("dur_ns")).alias("end"))
    runtime = events.filter((pl.col("kind") == "runtime") & pl.col("correlation").is_not_null())
    cpu_ops = events.filter(pl.col("kind") == "cpu_op")
    launches = parsed.op_launches.filter(pl.col("correlation").is_not_null())
    checked = 0
    for event_id, correlation, op_id in (
        launches.select("event_id", "correlation", "op_id").head(300).iter_rows()
    ):
        calls = runtime.filter(pl.col("correlation") == correlation).sort("ts_unix_ns", "_row")
        if calls.height == 0:
            continue  # linked by External id or not at all: test_kineto_ops covers those rules
        call = calls.row(0, named=True)
        around = cpu_ops.filter(
            (pl.col("pid") == call["pid"])
            & (pl.col("tid") == call["tid"])
            & (pl.col("ts_unix_ns") <= call["ts_unix_ns"])
            & (pl.col("end") >= call["end"])
        ).sort(["ts_unix_ns", "end", "_row"], descending=[True, False, True])
        assert op_id == (around["_row"][0] if around.height else None), event_id
        checked += 1
    assert checked or launches.height == 0


def test_both_paths_agree_on_the_sample_study() -> None:
    if not SAMPLE.exists():
        pytest.skip("sample_traces/ is absent")
    fast, slow = parse_trace(SAMPLE), parse_trace(SAMPLE, scanner=False)
    for name in ("ops", "op_launches", "memory_events"):
        assert getattr(fast, name).equals(getattr(slow, name)), name
    facts = json_facts(SAMPLE)
    assert fast.ops.height == facts["ops"] > 0
    assert fast.ops["input_dims"].is_not_null().sum() == facts["shapes"] > 0  # record_shapes=True
    assert fast.ops["module"].null_count() == fast.ops.height  # profiled without with_modules
    assert fast.op_launches.height == 0 and fast.memory_events.height == 0  # a CPU run, no profile_memory
