"""One trace's `op_calls` rows (sql/raw/op_calls_raw.sql): every host cpu_op call with what the op
views sum, computed from that trace's own frames (`ops`, `op_launches`, `steps`).

Each row depends on its trace alone, so the ingest task that parses a trace computes them from
the frames it holds and writes them as one more Parquet partition: the refresh then copies them
into the `op_calls` table instead of joining the whole run's ops again after every ingest. A trace stored
without them (an older tracehouse, other FLOP formulas) gets them from its stored frames through
the same function (ops/store.py).

The rules (a call's step, self time, launched device time, phase, counted FLOPs and bytes) are
op_calls'; this module is their one implementation.
"""

from __future__ import annotations

import polars as pl
from tracehouse.pipeline.ops.costs import FORMULA_OF, SIGNATURE_COLUMNS, op_costs
from tracehouse.pipeline.ops.tree_facts import BACKWARD_PREFIX, OPTIMIZER_PREFIX, tree_facts
from tracehouse.pipeline.warehouse.schema import OP_CALLS

# What a call needs from each frame (the stored partitions are read with these columns only).
OPS_COLUMNS = (
    "op_id",
    "parent_id",
    "kind",
    "name",
    "ts_unix_ns",
    "dur_ns",
    "pid",
    "tid",
    *SIGNATURE_COLUMNS[1:],
    "module",
)
LAUNCH_COLUMNS = ("op_id", "dur_ns", "module")
STEP_COLUMNS = ("step", "ts_unix_ns", "dur_ns", "pid", "tid")


def op_calls_frame(
    ops: pl.DataFrame, launches: pl.DataFrame, steps: pl.DataFrame, *, version: str
) -> pl.DataFrame:
    """The op_calls rows of one trace (OP_CALLS' columns, its keys left to the caller).

    * step: the ProfilerStep whose host window [ts, ts + dur) holds the call's start, else NULL;
    * self_ns: its duration less its direct children's (any host event kind), at least 0;
    * device_ns, device_events: the GPU events it launched itself (op_launches.op_id);
    * module: its own module path, else the one its kernels are linked to (op_launches.module);
    * phase, counted_flops, counted_bytes: from its place in the call tree (tree_facts) and the
      formulas (flops, bytes and dtype for ops whose name has one, else NULL);
    * gpu_rank, on_timeline: every call of a GPU rank is on the timeline; on a CPU-only rank,
      the calls of its main thread (the one holding the most ProfilerSteps), or every call when
      it has no step.
    """
    ops = ops.select(OPS_COLUMNS).sort("op_id")
    gpu_rank = launches.height > 0
    calls = ops.filter(pl.col("kind") == "cpu_op")
    costed = _costed(calls)
    facts = _tree(ops, costed)
    children = (  # one lazy query from here: one pass of Polars' fixed costs, not one per step
        ops.lazy()
        .filter(pl.col("parent_id").is_not_null())
        .group_by("parent_id")
        .agg(pl.col("dur_ns").sum().alias("children_ns"))
        .rename({"parent_id": "op_id"})
    )
    launched = (
        launches.lazy()
        .filter(pl.col("op_id").is_not_null())
        .group_by("op_id")
        .agg(
            pl.col("dur_ns").sum().alias("device_ns"),
            pl.len().cast(pl.Int64).alias("device_events"),
            pl.col("module").drop_nulls().first().alias("launch_module"),
        )
    )
    main = None if gpu_rank else _main_thread(steps)
    on_timeline = pl.lit(True)
    if main is not None and main[1] is not None:  # SQL's three-valued logic: a NULL pid or tid is NULL
        on_timeline = (pl.col("pid") == pl.lit(main[0], dtype=pl.String)) & (pl.col("tid") == main[1])
    rows = (
        _placed(costed.lazy(), steps)
        .join(facts.lazy(), on="op_id", how="left")
        .join(children, on="op_id", how="left")
        .join(launched, on="op_id", how="left")
    )
    has_formula = pl.col("flops").is_not_null()
    return (
        rows.select(
            pl.lit(gpu_rank).alias("gpu_rank"),
            on_timeline.alias("on_timeline"),
            "step",
            "op_id",
            "name",
            pl.coalesce("module", "launch_module").alias("module"),
            "phase",
            pl.max_horizontal(pl.col("dur_ns") - pl.col("children_ns").fill_null(0), pl.lit(0)).alias(
                "self_ns"
            ),
            pl.col("device_ns").fill_null(0),
            pl.col("device_events").fill_null(0),
            "flops",
            pl.when(has_formula)
            .then(pl.when(pl.col("above_work")).then(0).otherwise(pl.col("flops")))
            .alias("counted_flops"),
            pl.when(has_formula)
            .then(pl.when(pl.col("above_work") | pl.col("inside_unit")).then(0).otherwise(pl.col("bytes")))
            .alias("counted_bytes"),
            "dtype",
            pl.lit(version).alias("formulas_version"),
        )
        .cast({c: t for c, t in OP_CALLS.items()})
        .sort("op_id")  # in file order, whatever the joins did
        .collect()
    )


def _costed(calls: pl.DataFrame) -> pl.DataFrame:
    """The calls with flops, bytes and dtype where the name has a formula (else NULL)."""
    named = calls.filter(pl.col("name").is_in(list(FORMULA_OF)))
    costs = op_costs(named.select(SIGNATURE_COLUMNS).unique()).select(
        *SIGNATURE_COLUMNS, "flops", "bytes", "dtype"
    )
    return calls.join(costs, on=list(SIGNATURE_COLUMNS), how="left", nulls_equal=True)


def _tree(ops: pl.DataFrame, costed: pl.DataFrame) -> pl.DataFrame:
    """op_id, phase, above_work, inside_unit of every cpu_op (tree_facts over this one tree)."""
    tree = ops.select(
        "op_id",
        "parent_id",
        (pl.col("kind") == "cpu_op").alias("cpu_op"),
        pl.when(pl.col("name").str.starts_with(BACKWARD_PREFIX))
        .then(1)
        .when(pl.col("name").str.starts_with(OPTIMIZER_PREFIX))
        .then(2)
        .otherwise(0)
        .cast(pl.Int8)
        .alias("marker"),
    )
    return tree_facts(tree, costed.filter(pl.col("flops") > 0)["op_id"])


def _placed(calls: pl.LazyFrame, steps: pl.DataFrame) -> pl.LazyFrame:
    """The calls with their step: the latest step starting at or before the call, if it still runs."""
    if steps.height == 0:
        return calls.with_columns(pl.lit(None, dtype=pl.Int64).alias("step"))
    windows = (
        steps.lazy()
        .select(
            "step",
            pl.col("ts_unix_ns").alias("step_start"),
            (pl.col("ts_unix_ns") + pl.col("dur_ns")).alias("step_end"),
        )
        .sort("step_start")
    )
    return (
        calls.sort("ts_unix_ns")
        .join_asof(windows, left_on="ts_unix_ns", right_on="step_start", strategy="backward")
        .with_columns(pl.when(pl.col("ts_unix_ns") < pl.col("step_end")).then(pl.col("step")).alias("step"))
        .drop("step_start", "step_end")
    )


def _main_thread(steps: pl.DataFrame) -> tuple[str, str] | None:
    """A CPU-only rank's main thread: the (pid, tid) holding the most ProfilerSteps (ties: the
    least pid, then tid), or None without steps."""
    if steps.height == 0:
        return None
    counts = steps.group_by("pid", "tid").agg(pl.len().alias("n"))
    best = counts.sort(["n", "pid", "tid"], descending=[True, False, False], nulls_last=True).row(0)
    return best[0], best[1]
