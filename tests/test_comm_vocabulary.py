"""One communication vocabulary: the parser's name tests and the SQL's classification agree.

The SQL side is the real relations run on a raw database: each name becomes a kernel of GPU
rank 0 (gpu_events.class says whether it is comm) and a cpu_op, with a start of its own, on the
main thread of CPU-only rank 1 (cpu_calls.is_compute says whether it is a communication op,
device_intervals whether it is a communication span). Checked on every distinct event name of
every real trace, and on generated names (case variations, prefixes, substrings, unicode).
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.analysis_rawdb import US, ev, fill, kernel, raw_db, rows, step
from support.testdata import SAMPLE_TRACES, SHARED_DATA
from support.wh_helpers import write_trace
from tracehouse.pipeline.common import comm_vocabulary as vocab
from tracehouse.pipeline.common.comm_names import OPS
from tracehouse.pipeline.ingest.driver import ingest
from tracehouse.pipeline.parsers.kineto.names import is_comm_kernel, is_comm_name
from tracehouse.pipeline.warehouse.database import (
    connect,
    create_views,
    inputs_stamp,
    open_for_query,
    views_are_current,
)

SHARED_TRACES = sorted((SHARED_DATA / "traces").rglob("*.json*")) if SHARED_DATA.is_dir() else []
SAMPLE_FILES = sorted(SAMPLE_TRACES.rglob("*.pt.trace.json*"))


@functools.cache
def trace_names(path: Path) -> frozenset[str]:
    """Every distinct string `name` of the file's events, read in place."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        doc = json.load(handle)
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    return frozenset(e["name"] for e in events if isinstance(e, dict) and isinstance(e.get("name"), str))


def sql_classes(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> dict[str, tuple[bool, bool, bool]]:
    """Per name, what the SQL decides: (comm kernel, host comm op, comm span)."""
    names = sorted(set(names))
    start = {name: 10 * i for i, name in enumerate(names)}  # µs; each name's events start alone
    events = [kernel(n, start[n], 5, launch_us=None, rank=0) for n in names]
    events += [ev("cpu_op", n, start[n], 5, rank=1) for n in names]
    fill(con, events=events, steps=[step(1, -1, 10 * len(names) + 2, rank=1)])
    kernel_class = dict(con.execute("SELECT name, class FROM gpu_events WHERE rank = 0").fetchall())
    by_start = {start[n] * US: n for n in names}
    calls = dict(con.execute("SELECT start_ns, is_compute FROM cpu_calls WHERE rank = 1").fetchall())
    spans = {
        r["start_ns"]
        for r in rows(con, "SELECT start_ns FROM device_intervals WHERE rank = 1 AND class = 'comm'")
    }
    assert len(kernel_class) == len(names) and set(calls) | spans == set(by_start)
    return {
        n: (
            kernel_class[n] == "comm",
            start[n] * US in spans or not calls[start[n] * US],
            start[n] * US in spans,
        )
        for n in names
    }


def python_classes(name: str) -> tuple[bool, bool, bool]:
    """What the parser's name tests decide: (comm kernel, host comm op, comm span)."""
    return is_comm_kernel(name), vocab.is_host_comm_op(name), vocab.is_comm_span(name)


def disagreements(con: duckdb.DuckDBPyConnection, names: Iterable[str]) -> dict[str, tuple]:
    return {
        name: (python_classes(name), sql)
        for name, sql in sql_classes(con, names).items()
        if python_classes(name) != sql
    }


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return raw_db()


@pytest.mark.parametrize("path", SHARED_TRACES, ids=lambda p: p.name)
def test_python_and_sql_agree_on_every_name_of_a_shared_trace(con, path):
    assert disagreements(con, trace_names(path)) == {}


def test_the_real_names_hold_every_kind():
    # Agreement on names of one kind only would say little about the others.
    if not SHARED_TRACES:
        pytest.skip(f"../shared/data is absent ({SHARED_DATA}); the real public traces live there")
    assert len(SHARED_TRACES) >= 20
    names = set().union(*(trace_names(p) for p in [*SHARED_TRACES, *SAMPLE_FILES]))
    assert any(is_comm_kernel(n) for n in names)
    assert any(vocab.is_host_comm_op(n) and not vocab.is_comm_span(n) for n in names)
    assert any(vocab.is_comm_span(n) for n in names)
    assert any(vocab.is_label(n) for n in names)


def test_python_and_sql_agree_on_every_name_of_the_sample_traces(con):
    names = set().union(*(trace_names(p) for p in SAMPLE_FILES))
    assert disagreements(con, names) == {}


PATTERNS = [
    *vocab.KERNEL_PREFIXES,
    *vocab.KERNEL_SUBSTRINGS,
    "ncclKernel",
    "ncclDevKernel",
    *vocab.HOST_OP_PREFIXES,
    *vocab.HOST_OP_NAMES,
    *vocab.COMM_SPAN_PREFIXES,
    vocab.LABEL_START,
    "rccl:",
    "ccl",
    "nccl_",
    "K",  # KELVIN SIGN: lowercases to k
]


@st.composite
def names(draw: st.DrawFn) -> str:
    """A vocabulary pattern in random case, with random text around it, or any text."""
    if draw(st.booleans()):
        return draw(st.text(max_size=12))
    pattern = draw(st.sampled_from(PATTERNS))
    flips = draw(st.lists(st.booleans(), min_size=len(pattern), max_size=len(pattern)))
    if draw(st.booleans()):
        pattern = "".join(c.swapcase() if flip else c for c, flip in zip(pattern, flips, strict=True))
    before = draw(
        st.sampled_from(["", "", "", "", "void ", "x", "_", " ", "aten::", "İ"]) | st.text(max_size=4)
    )
    after = draw(st.sampled_from(["", "_x", "_AllReduce_RING_LL", "(int)", "\n"]) | st.text(max_size=4))
    return before + pattern + after


# The edges of each kind: prefix vs whole name, case, a prefix not at the start, a missing colon.
EDGES = [
    "record_param_comms_x",
    "record_param_comms\n",
    "Record_Param_Comms",
    "xrecord_param_comms",
    "gloo",
    "Gloo:all_reduce",
    " gloo:x",
    "c10d:x",
    "C10D::allreduce_",
    "_c10d_functional:x",
    "NCCL:all_reduce",
    "tracehouse.collective",
    "xnccl",
    "void ncclDevKernel_Generic(int)",
    "NCCKernel",
    "nccl\u212aernel_AllReduce",
    "",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(names(), min_size=1, max_size=25))
@example(generated=EDGES)
def test_python_and_sql_agree_on_generated_names(con, generated):
    assert disagreements(con, generated) == {}


def test_the_check_tells_comm_from_compute(con):
    # A check that found every name "not comm" on both sides would agree vacuously.
    got = sql_classes(
        con, ["NcclDevKernel_AllReduce", "gemm", "c10d::allreduce_", "gloo:all_reduce", "aten::mm"]
    )
    assert got == {
        "NcclDevKernel_AllReduce": (True, False, False),
        "gemm": (False, False, False),
        "c10d::allreduce_": (False, True, False),
        "gloo:all_reduce": (False, True, True),
        "aten::mm": (False, False, False),
    }


def test_parser_comm_names_are_the_vocabulary():
    assert is_comm_name("record_param_comms") and not is_comm_name("record_param_comms_x")
    assert is_comm_name(vocab.LABEL_START + "op=all_reduce") and not vocab.is_host_comm_op(vocab.LABEL_START)
    assert is_comm_name("RCCL_AllReduce") and not is_comm_name("aten::gloo:x")
    kinds = {kind for kind, _ in vocab.seed_rows()}
    assert kinds == {
        "kernel_prefix",
        "kernel_substring",
        "host_op_prefix",
        "host_op_name",
        "comm_span_prefix",
    }


def test_a_changed_vocabulary_changes_the_inputs_stamp_and_the_tables(tmp_path, monkeypatch):
    warehouse = tmp_path / "wh"
    ingest([write_trace(tmp_path / "run" / "rank0.json", rank=0)], warehouse)  # kernels gemm_0..2
    with connect(warehouse) as c:
        before = inputs_stamp(c)
        assert c.sql("SELECT DISTINCT class FROM gpu_events WHERE kind = 'kernel'").fetchall() == [
            ("compute",)
        ]
    # tracehouse upgraded: gemm kernels are now communication
    monkeypatch.setattr(vocab, "KERNEL_PREFIXES", (*vocab.KERNEL_PREFIXES, "gemm"))
    with connect(warehouse, read_only=True) as c:
        assert not views_are_current(c)
    with open_for_query(warehouse) as c:  # read-only: rebuilt in memory from the new definition
        assert c.sql("SELECT DISTINCT class FROM gpu_events WHERE kind = 'kernel'").fetchall() == [("comm",)]
    with connect(warehouse) as c:
        create_views(c)
        assert inputs_stamp(c) != before
        assert c.sql("SELECT DISTINCT class FROM gpu_events WHERE kind = 'kernel'").fetchall() == [("comm",)]
        assert c.sql("SELECT count(*) FROM comm_vocabulary WHERE pattern = 'gemm'").fetchall() == [(1,)]


def test_a_hand_edited_vocabulary_is_not_trusted(tmp_path):
    warehouse = tmp_path / "wh"
    nccl = {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 7, "ts": 90.0}
    nccl |= {"dur": 5.0, "args": {"stream": 7, "device": 0}}
    ingest([write_trace(tmp_path / "run" / "rank0.json", rank=0, extra_events=[nccl])], warehouse)
    with connect(warehouse) as c:
        stamp = inputs_stamp(c)
        c.execute("DELETE FROM comm_vocabulary WHERE kind = 'kernel_prefix'")
        assert inputs_stamp(c) != stamp
    comm = "SELECT count(*) FROM gpu_events WHERE class = 'comm'"
    with open_for_query(warehouse) as c:
        assert c.sql(comm).fetchall() == [(1,)]
    with connect(warehouse) as c:
        create_views(c)  # the next ingest's catalog phase puts the rows back
        assert inputs_stamp(c) == stamp and c.sql(comm).fetchall() == [(1,)]


def test_a_collector_label_target_must_name_a_normalised_op():
    pytest.importorskip("torch")
    from tracehouse.collectors.comm_labels import C10D_TARGETS, FUNCOL_TARGETS, Target

    assert {t.op for t in [*C10D_TARGETS.values(), *FUNCOL_TARGETS.values()]} <= set(OPS)
    with pytest.raises(ValueError, match="'allreduce' is not a normalised collective op"):
        Target("allreduce", "tensor")
