"""Each op's phase and place relative to the calls doing work (pipeline/ops/tree_facts.py), as
op_calls holds them (phase, counted_flops, counted_bytes):

* generated forests (Hypothesis) against a brute-force oracle that walks every op's ancestors;
* a hand-built tree, worked out below;
* on the sample study and shared GPU traces, op_calls agrees with the recursive SQL definition
  op_calls used before (walks over `ops` by parent_id, one level per pass), op by op;
* rows healed by the driver (traces stored without op_calls) equal the ones the tasks wrote.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.testdata import shared_path
from tracehouse.pipeline.ops.tree_facts import tree_facts

PHASE = {0: "forward", 1: "backward", 2: "optimizer"}


def _facts(nodes: list[dict]) -> dict:
    """tree_facts over nodes (trace_no, op_id, parent_id, cpu_op, marker, works), by (trace, op)."""
    ops = pl.DataFrame(
        [{k: n[k] for k in ("trace_no", "op_id", "parent_id", "cpu_op", "marker")} for n in nodes],
        schema={"trace_no": pl.Int64, "op_id": pl.Int64, "parent_id": pl.Int64, "cpu_op": pl.Boolean,
                "marker": pl.Int8},
    ).sort("trace_no", "op_id")  # fmt: skip
    working = pl.DataFrame(
        [{"trace_no": n["trace_no"], "op_id": n["op_id"]} for n in nodes if n["works"]],
        schema={"trace_no": pl.Int64, "op_id": pl.Int64},
    )
    out = {}
    for (trace,), tree in ops.partition_by("trace_no", as_dict=True).items():  # one tree per trace
        works = working.filter(pl.col("trace_no") == trace)["op_id"]
        for r in tree_facts(tree.drop("trace_no"), works).to_dicts():
            out[(trace, r["op_id"])] = (r["phase"], r["above_work"], r["inside_unit"])
    return out


def _oracle(nodes: list[dict]) -> dict:
    """The definitions, by walking each op's chain of ancestors."""
    by_key = {(n["trace_no"], n["op_id"]): n for n in nodes}

    def ancestors(n: dict) -> list[dict]:  # nearest first
        chain = []
        while n["parent_id"] is not None:
            n = by_key[(n["trace_no"], n["parent_id"])]
            chain.append(n)
        return chain

    working_ancestors = {id(a) for n in nodes if n["works"] for a in ancestors(n)}
    units = {id(n) for n in nodes if n["works"] and id(n) not in working_ancestors}
    out = {}
    for n in nodes:
        if not n["cpu_op"]:
            continue
        markers = [a for a in [n, *ancestors(n)] if a["marker"]]
        phase = PHASE[markers[-1]["marker"]] if markers else "forward"  # the outermost decides
        out[(n["trace_no"], n["op_id"])] = (
            phase,
            id(n) in working_ancestors,
            any(id(a) in units for a in ancestors(n)),
        )
    return out


@st.composite
def forests(draw) -> list[dict]:
    """1-3 traces of up to 30 ops each; a parent is an earlier op of the trace; op_ids are sparse."""
    nodes = []
    for trace in range(1, draw(st.integers(1, 3)) + 1):
        ids: list[int] = []
        for _ in range(draw(st.integers(0, 30))):
            op_id = (ids[-1] if ids else 0) + draw(st.integers(1, 5))
            parent = draw(st.one_of(st.none(), st.sampled_from(ids))) if ids else None
            cpu_op = draw(st.booleans())
            nodes.append(
                {
                    "trace_no": trace,
                    "op_id": op_id,
                    "parent_id": parent,
                    "cpu_op": cpu_op,
                    "marker": draw(st.sampled_from([0, 0, 0, 1, 2])),
                    "works": cpu_op and draw(st.booleans()),
                }
            )
            ids.append(op_id)
    return nodes


@settings(max_examples=300, deadline=None)
@given(forests())
def test_generated_forests_match_the_walk_up_oracle(nodes) -> None:
    assert _facts(nodes) == _oracle(nodes)


def test_a_hand_built_tree() -> None:
    # step (annotation) > evaluate_function (backward marker) > linear > addmm (works) > mul (works)
    #                                                                  > copy_ (no work)
    #                   > Optimizer.step (marker) > _foreach_add_ (works)
    def node(op_id, parent, cpu_op=True, marker=0, works=False):
        return {"trace_no": 1, "op_id": op_id, "parent_id": parent, "cpu_op": cpu_op, "marker": marker,
                "works": works}  # fmt: skip

    nodes = [
        node(1, None, cpu_op=False),
        node(2, 1, marker=1),
        node(3, 2),
        node(4, 3, works=True),
        node(5, 4, works=True),
        node(6, 3),
        node(7, 1, cpu_op=False, marker=2),
        node(8, 7, works=True),
    ]
    assert _facts(nodes) == {
        # the step itself is no cpu_op (no row)
        (1, 2): ("backward", True, False),
        (1, 3): ("backward", True, False),
        (1, 4): ("backward", True, False),  # works, but so does mul below it: not the unit
        (1, 5): ("backward", False, False),  # the unit of work
        (1, 6): ("backward", False, False),  # beside the unit, not inside it
        (1, 8): ("optimizer", False, False),
    }


# The definition op_calls used before the tree walks: recursive walks over `ops`, one level per pass
# (which calls do work: op_calls.flops > 0).
RECURSIVE = """
WITH RECURSIVE costed AS (
    SELECT o.*, c.flops FROM ops AS o
    LEFT JOIN op_calls AS c ON o.kind = 'cpu_op' AND c.study = o.study AND c.run_id = o.run_id
        AND c.rank = o.rank AND c.op_id = o.op_id
),
above_work(content_hash, op_id) AS (
    SELECT content_hash, parent_id FROM costed WHERE flops > 0 AND parent_id IS NOT NULL
    UNION
    SELECT o.content_hash, o.parent_id FROM ops AS o
    JOIN above_work AS a ON o.content_hash = a.content_hash AND o.op_id = a.op_id
    WHERE o.parent_id IS NOT NULL
),
inside_unit(content_hash, op_id) AS (
    SELECT o.content_hash, o.op_id FROM ops AS o
    JOIN costed AS u ON o.content_hash = u.content_hash AND o.parent_id = u.op_id
    ANTI JOIN above_work AS a ON u.content_hash = a.content_hash AND u.op_id = a.op_id
    WHERE u.flops > 0
    UNION
    SELECT o.content_hash, o.op_id FROM ops AS o
    JOIN inside_unit AS i ON o.content_hash = i.content_hash AND o.parent_id = i.op_id
),
phased(content_hash, op_id, phase) AS (
    SELECT content_hash, op_id, CASE
        WHEN starts_with(name, 'autograd::engine::evaluate_function:') THEN 'backward'
        WHEN starts_with(name, 'Optimizer.') THEN 'optimizer' ELSE 'forward' END
    FROM ops WHERE parent_id IS NULL
    UNION ALL
    SELECT o.content_hash, o.op_id, CASE
        WHEN p.phase <> 'forward' THEN p.phase
        WHEN starts_with(o.name, 'autograd::engine::evaluate_function:') THEN 'backward'
        WHEN starts_with(o.name, 'Optimizer.') THEN 'optimizer' ELSE 'forward' END
    FROM ops AS o JOIN phased AS p ON o.content_hash = p.content_hash AND o.parent_id = p.op_id
)
SELECT o.study, o.run_id, o.rank, o.op_id, ph.phase,
    a.op_id IS NOT NULL AS above_work, i.op_id IS NOT NULL AS inside_unit
FROM ops AS o
LEFT JOIN (SELECT DISTINCT * FROM above_work) AS a ON o.content_hash = a.content_hash AND o.op_id = a.op_id
LEFT JOIN (SELECT DISTINCT * FROM inside_unit) AS i ON o.content_hash = i.content_hash AND o.op_id = i.op_id
LEFT JOIN phased AS ph ON o.content_hash = ph.content_hash AND o.op_id = ph.op_id
WHERE o.kind = 'cpu_op'
"""
# op_calls' columns as the definition gives them: the phase, FLOPs counted only where no descendant
# works, bytes 0 where one does or an ancestor is the unit (else its bytes, not checked here).
DISAGREEING = """
SELECT count(*) FROM oracle AS o
FULL JOIN op_calls AS c USING (study, run_id, rank, op_id)
WHERE o.op_id IS NULL OR c.op_id IS NULL OR o.phase IS DISTINCT FROM c.phase
    OR c.counted_flops IS DISTINCT FROM
        CASE WHEN c.flops IS NULL THEN NULL WHEN o.above_work THEN 0 ELSE c.flops END
    OR (c.flops IS NOT NULL AND (o.above_work OR o.inside_unit) AND c.counted_bytes IS DISTINCT FROM 0)
"""


def _equal_to_the_recursive_definition(warehouse_dir: Path) -> tuple[int, tuple[int, int]]:
    from tracehouse.pipeline.warehouse import database

    with database.open_for_query(warehouse_dir) as con:
        con.execute(f"CREATE TEMP TABLE oracle AS {RECURSIVE}")
        assert con.sql(DISAGREEING).fetchall()[0][0] == 0
        worked = con.sql(
            "SELECT count(*) FILTER (above_work), count(*) FILTER (inside_unit) FROM oracle"
        ).fetchall()
        return con.sql("SELECT count(*) FROM oracle").fetchall()[0][0], worked[0]


@pytest.mark.slow
def test_the_sample_study_equals_the_recursive_definition(sample_warehouse) -> None:
    rows, (above, inside) = _equal_to_the_recursive_definition(sample_warehouse)
    assert rows > 200_000 and above > 0 and inside > 0


@pytest.mark.slow
def test_shared_gpu_traces_equal_the_recursive_definition(tmp_path) -> None:
    from tracehouse.pipeline.ingest.driver import ingest

    traces = [
        shared_path(f"traces/{name}.json.gz")
        for name in (
            "tracelens/h100_bert_small",
            "tracelens/mi300_resnet18_window",
            "hta/mtia_trace_single_rank",
        )
    ]
    for i, trace in enumerate(traces):
        summary = ingest([trace], tmp_path / "wh", run=f"r{i}", ranks={str(trace): 0})
        assert summary.failed == [], summary.failed
    rows, (above, _) = _equal_to_the_recursive_definition(tmp_path / "wh")
    assert rows > 10_000 and above > 0


def _op_calls(warehouse_dir: Path) -> pl.DataFrame:
    from tracehouse.pipeline.warehouse import database

    with database.open_for_query(warehouse_dir) as con:
        frame = con.sql("SELECT * EXCLUDE (formulas_version) FROM op_calls_raw").pl()
    return frame.sort(frame.columns, nulls_last=True)


def _unregister_op_calls(warehouse_dir: Path) -> None:
    """Make the warehouse look ingested by an older tracehouse: no trace has an op_calls partition."""
    import duckdb

    with duckdb.connect(str(warehouse_dir / "tracehouse.duckdb")) as c:
        c.execute("DELETE FROM parquet_files WHERE table_name = 'op_calls'")


@pytest.mark.slow
def test_traces_stored_without_op_calls_are_healed_in_batches_to_the_same_rows(tmp_path, monkeypatch) -> None:
    """A warehouse whose traces have no op_calls partition (an older tracehouse) gets their rows from
    the stored ops, op_launches and steps at the next ingest, in batches of at most BATCH_OPS host ops
    (one trace may be a batch alone): the same rows the tasks wrote, and the next ingest reads none."""
    import duckdb
    from support.testdata import sample_runs
    from tracehouse.pipeline.ingest.driver import ingest
    from tracehouse.pipeline.ops import store

    *first, second, third = sample_runs()[:5]
    assert not ingest(first, tmp_path / "wh").failed
    written = _op_calls(tmp_path / "wh")
    _unregister_op_calls(tmp_path / "wh")
    batches: list[int] = []
    heal = store._heal_batch

    def counted(connection, hashes, version):
        batches.append(len(hashes))
        return heal(connection, hashes, version)

    monkeypatch.setattr(store, "BATCH_OPS", 30_000)
    monkeypatch.setattr(store, "_heal_batch", counted)
    assert not ingest([second], tmp_path / "wh").failed
    with duckdb.connect(str(tmp_path / "wh" / "tracehouse.duckdb"), read_only=True) as c:
        first_traces = c.sql(f"SELECT count(*) FROM traces WHERE path NOT LIKE '{second}%'").fetchall()[0][0]
        healed = c.sql("SELECT count(DISTINCT content_hash) FROM op_calls_healed").fetchall()[0][0]
    assert len(batches) > 1 and max(batches) > 1 and sum(batches) == first_traces == healed
    both = _op_calls(tmp_path / "wh")
    assert both.filter(pl.col("run_id").is_in(written["run_id"].unique().implode())).equals(written)
    batches.clear()
    assert not ingest([third], tmp_path / "wh").failed
    assert batches == []  # healed once
    rows, _ = _equal_to_the_recursive_definition(tmp_path / "wh")
    assert rows > 10_000


def test_an_ingest_reads_no_stored_ops(tmp_path, monkeypatch) -> None:
    """The tasks write each trace's op_calls: an ingest into a warehouse whose traces all have them
    reads no stored partition of ops, op_launches or steps."""
    from support.testdata import sample_runs
    from tracehouse.pipeline.ingest.driver import ingest
    from tracehouse.pipeline.ops import store

    first, second = sample_runs()[:2]
    assert not ingest([first], tmp_path / "wh").failed
    read: list[str] = []
    monkeypatch.setattr(store, "stored_rows", lambda connection, table, hashes, columns: read.append(table))
    assert not ingest([second], tmp_path / "wh").failed
    assert read == []
    assert _op_calls(tmp_path / "wh").height > 10_000


def test_a_trace_without_calls_is_computed_once(tmp_path, monkeypatch) -> None:
    """A trace with host ops but no cpu_op gets an empty op_calls partition ("computed: none"), so no
    later refresh reads its stored ops again."""
    from support.tracebuilder import annotation, step, write_trace
    from tracehouse.pipeline.ingest.driver import ingest
    from tracehouse.pipeline.ops import store
    from tracehouse.pipeline.warehouse import database

    events = [
        step(1, 0, 100),
        annotation("forward", 10, 50),
        {**annotation("f", 20, 5), "cat": "python_function"},
    ]
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        write_trace(
            tmp_path / run / "r0.json",
            events if run == "a" else [step(2, 0, 10)],
            distributed_info={"rank": 0},
        )
    assert not ingest([tmp_path / "a"], tmp_path / "wh").failed
    with database.open_for_query(tmp_path / "wh") as con:
        assert con.sql("SELECT n_ops FROM traces").fetchall() == [(3,)]
        assert con.sql("SELECT n_rows FROM parquet_files WHERE table_name = 'op_calls'").fetchall() == [(0,)]
    read: list[str] = []
    monkeypatch.setattr(store, "stored_rows", lambda connection, table, hashes, columns: read.append(table))
    assert not ingest([tmp_path / "b"], tmp_path / "wh").failed
    assert read == []
