"""Reading a warehouse: read-only SQL (`tracehouse query`) and the handle `tracehouse.open` returns.

Every read goes through a connection that never writes the warehouse (stale views are built in
memory, see `database.open_for_query`), with DuckDB's `file_search_path` set to the warehouse
folder (`database.connect`), so the raw Parquet views resolve from any working directory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
from tracehouse.pipeline.common.errors import WarehouseError, one_line
from tracehouse.pipeline.display import html_table, offline, whole
from tracehouse.pipeline.warehouse.database import closed_on_error, open_for_query
from tracehouse.pipeline.warehouse.sandbox import seal, sealed

if TYPE_CHECKING:  # altair takes seconds to import: only chart and report calls pay for it
    import altair as alt
    import polars as pl
    from tracehouse.pipeline.compare import RunDiff
    from tracehouse.reports.build import ReportResult

# What a Warehouse's repr counts, and the columns of runs its notebook table shows.
_COUNTS = "SELECT count(DISTINCT study), count(*), sum(n_rank_traces) FROM runs"
_RUN_COLUMNS = ("study", "run_id", "model", "strategy", "world_size", "n_rank_traces", "status")
# Statement types that only read; anything else (COPY ... TO, INSERT, SET, ATTACH, ...) is refused.
READ_STATEMENTS = {"SELECT", "EXPLAIN", "PRAGMA"}


def check_read_only(sql: str) -> None:
    """Refuse, with one line, any statement that is not a read."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot parse the query: {one_line(exc)}") from exc
    if not statements:
        raise WarehouseError("the query is empty")
    for statement in statements:
        kind = statement.type.name
        if kind not in READ_STATEMENTS:
            raise WarehouseError(f"refused: {kind} statements would change the warehouse; query is read-only")


def open_reader(warehouse_dir: str | Path) -> duckdb.DuckDBPyConnection:
    """A read-only connection over a warehouse for tracehouse's own queries (its relative Parquet paths
    resolve from anywhere); a user's SQL runs on `open_sealed`."""
    return open_for_query(Path(warehouse_dir).absolute())


def open_sealed(warehouse_dir: str | Path, *, allow: Iterable[str | Path] = ()) -> duckdb.DuckDBPyConnection:
    """A connection in the query sandbox: it reads the warehouse and nothing else (see `sandbox`).

    `allow`: directories whose files the user's SQL may also read (and write: DuckDB's rule).
    """
    directory = Path(warehouse_dir).absolute()
    connection = open_for_query(directory, isolated=True)
    with closed_on_error(connection):
        seal(connection, directory, allow=[Path(d) for d in allow])
    return connection


def query(
    warehouse_dir: str | Path, sql: str, *, allow: Iterable[str | Path] = ()
) -> tuple[list[str], list[tuple]]:
    """Column names and rows of the last statement, run in the query sandbox."""
    check_read_only(sql)
    with open_sealed(warehouse_dir, allow=allow) as connection:
        try:
            result = sealed(connection, Path(warehouse_dir), lambda: connection.execute(sql))
            columns = [d[0] for d in result.description or []]
            return columns, result.fetchall()
        except duckdb.Error as exc:
            raise WarehouseError(one_line(exc)) from exc


def _filtered(
    connection: duckdb.DuckDBPyConnection, view: str, filters: dict[str, Any]
) -> duckdb.DuckDBPyRelation:
    relation = connection.table(view)
    for column, value in filters.items():
        if value is not None:
            relation = relation.filter(duckdb.ColumnExpression(column) == duckdb.ConstantExpression(value))
    return relation


class Warehouse:
    """A warehouse opened read-only: SQL, one method per public view, its charts and its report.

    Each view method returns a DuckDB relation (`.pl()`, `.df()`, `.arrow()`, `.fetchall()`),
    filtered by the given study, run and rank. Close it (or use `with`) to release the file.
    """

    def __init__(self, directory: str | Path, *, allow_files: Iterable[str | Path] = ()) -> None:
        self.directory = Path(directory).absolute()
        self.connection = open_sealed(self.directory, allow=allow_files)
        self.charts = Charts(self)

    def __enter__(self) -> Warehouse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        """The folder and what it holds, on one line."""
        try:
            studies, runs, traces = self.connection.sql(_COUNTS).fetchall()[0]
        except duckdb.ConnectionException:
            return f"tracehouse.Warehouse({str(self.directory)!r}) (closed)"
        except duckdb.Error as exc:  # a repr never raises: a warehouse made by hand may lack columns
            return f"tracehouse.Warehouse({str(self.directory)!r}) ({one_line(exc)})"
        study_word = "study" if studies == 1 else "studies"
        return (
            f"tracehouse.Warehouse({str(self.directory)!r}): {studies} {study_word}, {runs} runs, "
            f"{traces or 0} rank traces"
        )

    def _repr_html_(self) -> str | None:
        """The warehouse's runs as a table (a notebook shows this); None (the repr instead) when closed."""
        caption = f"{self!r}; wh.views() lists the public views"
        try:
            rows = self.connection.sql(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs ORDER BY ALL").fetchall()
        except duckdb.Error:
            return None
        return html_table(_RUN_COLUMNS, rows, caption)

    def views(self) -> pl.DataFrame:
        """The public views, one row each: name, meaning (also its DuckDB comment), grain and columns
        (a Polars frame that displays every row)."""
        import polars as pl
        from tracehouse.pipeline.warehouse.view_docs import contracts_by_relation, meaning

        rows = [
            {
                "name": c.relation,
                "meaning": meaning(c),
                "grain": c.grain,
                "columns": [col.name for col in c.columns],
            }
            for c in contracts_by_relation().values()
        ]
        return whole(pl.DataFrame(rows))

    def close(self) -> None:
        """Release the warehouse file."""
        self.connection.close()

    def sql(self, query: str) -> duckdb.DuckDBPyRelation:
        """Any read-only SQL over the warehouse, as a DuckDB relation (in the query sandbox)."""
        check_read_only(query)
        try:
            return sealed(self.connection, self.directory, lambda: self.connection.sql(query))
        except duckdb.Error as exc:
            raise WarehouseError(one_line(exc)) from exc

    def studies(self) -> list[str]:
        """The studies the warehouse holds."""
        return [s for (s,) in self.connection.sql("SELECT DISTINCT study FROM runs ORDER BY 1").fetchall()]

    def runs(self, study: str | None = None, run: str | None = None) -> duckdb.DuckDBPyRelation:
        """One row per run: model, strategy, world size, degrees, tokens per step, peak FLOP/s."""
        return _filtered(self.connection, "runs", {"study": study, "run_id": run})

    def scale_points(self, study: str | None = None, run: str | None = None) -> duckdb.DuckDBPyRelation:
        """One row per run: step time, throughput, MFU, scaling efficiency, breakdown shares, energy."""
        return _filtered(self.connection, "scale_points", {"study": study, "run_id": run})

    def step_breakdown(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per rank and step window: compute, exposed/overlapped communication, other, idle (µs)."""
        return _filtered(self.connection, "step_breakdown", {"study": study, "run_id": run, "rank": rank})

    def rank_summary(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per rank: whole-trace totals and the overlap of communication with compute."""
        return _filtered(self.connection, "rank_summary", {"study": study, "run_id": run, "rank": rank})

    def collectives(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per collective call per rank: op, group, sequence number, bytes, start, duration."""
        return _filtered(self.connection, "collectives", {"study": study, "run_id": run, "rank": rank})

    def collective_instances(
        self, study: str | None = None, run: str | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per collective matched across ranks: transfer, wait, skew, algbw and busbw."""
        return _filtered(self.connection, "collective_instances", {"study": study, "run_id": run})

    def collective_skew(self, study: str | None = None, run: str | None = None) -> duckdb.DuckDBPyRelation:
        """One row per run, process group and op: how far apart the ranks start and end their collectives."""
        return _filtered(self.connection, "collective_skew", {"study": study, "run_id": run})

    def clock_offsets(self, study: str | None = None, run: str | None = None) -> duckdb.DuckDBPyRelation:
        """One row per run and host: its clock offset estimated from collectives (reported, never applied)."""
        return _filtered(self.connection, "clock_offsets", {"study": study, "run_id": run})

    def power_coverage(self, study: str | None = None, run: str | None = None) -> duckdb.DuckDBPyRelation:
        """One row per run: whether power was captured, from which source, or why not."""
        return _filtered(self.connection, "power_coverage", {"study": study, "run_id": run})

    def step_stragglers(self, study: str | None = None, run: str | None = None) -> duckdb.DuckDBPyRelation:
        """One row per run and step: the slowest rank and how far it is behind the others."""
        return _filtered(self.connection, "step_stragglers", {"study": study, "run_id": run})

    def step_energy(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per device and step window: its energy and how it was measured."""
        return _filtered(self.connection, "step_energy", {"study": study, "run_id": run, "rank": rank})

    def power_samples(self, study: str | None = None, run: str | None = None) -> duckdb.DuckDBPyRelation:
        """One row per power sample: host, device, time, watts, energy counter, source."""
        return _filtered(self.connection, "power_samples", {"study": study, "run_id": run})

    def comm_exposure(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per communication interval per step window: its collective, and how much was exposed."""
        return _filtered(self.connection, "comm_exposure", {"study": study, "run_id": run, "rank": rank})

    def exposed_comm_by_collective(
        self, study: str | None = None, run: str | None = None
    ) -> duckdb.DuckDBPyRelation:
        """Per run, op, parallel dimension and phase: the exposed communication per step, wait vs transfer."""
        return _filtered(self.connection, "exposed_comm_by_collective", {"study": study, "run_id": run})

    def idle_causes(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per rank and step window: idle time split into host wait, device wait and unknown."""
        return _filtered(self.connection, "idle_causes", {"study": study, "run_id": run, "rank": rank})

    def top_kernels(self, study: str | None = None, run: str | None = None) -> duckdb.DuckDBPyRelation:
        """One row per kernel or op name of a run: calls, time per rank, class, place by time."""
        return _filtered(self.connection, "top_kernels", {"study": study, "run_id": run})

    def op_breakdown(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per step, rank, op and module: its time, FLOPs, bytes, rates and roofline bound."""
        return _filtered(self.connection, "op_breakdown", {"study": study, "run_id": run, "rank": rank})

    def module_breakdown(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per step, rank, module path and phase: op_breakdown rolled up by layer."""
        return _filtered(self.connection, "module_breakdown", {"study": study, "run_id": run, "rank": rank})

    def critical_path(
        self, study: str | None = None, run: str | None = None, step: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per segment of a replayed step's critical path across ranks (or why a run has none)."""
        return _filtered(self.connection, "critical_path", {"study": study, "run_id": run, "step": step})

    def op_slack(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per step, rank and op: how much one call could grow before the replayed step grows."""
        return _filtered(self.connection, "op_slack", {"study": study, "run_id": run, "rank": rank})

    def kernel_stats(self, study: str | None = None, run: str | None = None) -> duckdb.DuckDBPyRelation:
        """One row per kernel of a run: its call durations' quantiles over all ranks, per-rank spread."""
        return _filtered(self.connection, "kernel_stats", {"study": study, "run_id": run})

    def launch_stats(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per rank: launch-to-start delays and the GPU events shorter than their launch call."""
        return _filtered(self.connection, "launch_stats", {"study": study, "run_id": run, "rank": rank})

    def memory_timeline(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per memory event: allocated, reserved and net bytes after it, per rank and device."""
        return _filtered(self.connection, "memory_timeline", {"study": study, "run_id": run, "rank": rank})

    def step_memory(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per rank, step and device: the peak allocated and reserved bytes."""
        return _filtered(self.connection, "step_memory", {"study": study, "run_id": run, "rank": rank})

    def trace_coverage(
        self, study: str | None = None, run: str | None = None, rank: int | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per rank trace: which rule gave its breakdown, or why it has none."""
        return _filtered(self.connection, "trace_coverage", {"study": study, "run_id": run, "rank": rank})

    def network_curves(
        self, study: str | None = None, run: str | None = None, op: str | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per calibration point (nccl-tests size or traced collective): op, ranks, bytes, busbw."""
        return _filtered(self.connection, "network_curves", {"study": study, "run_id": run, "op": op})

    def projections(
        self, study: str | None = None, run: str | None = None, scenario: str | None = None
    ) -> duckdb.DuckDBPyRelation:
        """One row per run, scenario and world size `tracehouse project` replayed: step, throughput, knee."""
        exists = "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'projections'"
        if not self.connection.sql(exists).fetchall()[0][0]:
            raise WarehouseError(
                f"{self.directory}: no projections yet; make them with "
                "tracehouse.project(DIR, study=S, world_sizes=[8, 16, ...])"
            )
        return _filtered(
            self.connection, "projections", {"study": study, "run_id": run, "scenario": scenario}
        )

    def ingest_errors(self) -> duckdb.DuckDBPyRelation:
        """One row per file whose latest ingest failed: path, hash, one-line reason, internal or not."""
        return self.connection.table("ingest_errors")

    def diff(self, run_a: str, run_b: str, *, study: str | None = None, top: int = 10) -> RunDiff:
        """What changed from run A to run B per step: components, then kernels/ops, largest first."""
        from tracehouse.pipeline.compare import diff_runs

        return diff_runs(self.connection, run_a, run_b, study=study, top=top)

    def report(
        self, path: str | Path, *, study: str | None = None, png_dir: str | Path | None = None
    ) -> ReportResult:
        """Write the study's self-contained HTML report (what `tracehouse report` writes)."""
        from tracehouse.reports.build import build_report

        return build_report(self.directory, path, study=study, png_dir=png_dir)


@dataclass(frozen=True)
class Charts:
    """The report's charts, each `name(study=...)` -> an Altair chart (saying why, when there is no data).

    In a notebook each draws itself as an inline SVG, offline (pipeline/display.py), unless an
    Altair renderer was chosen (`alt.renderers.enable(...)`); `.save()`, `.to_dict()` work as usual.
    """

    warehouse: Warehouse

    def _study(self, study: str | None) -> str:
        from tracehouse.reports.source import pick_study

        return pick_study(self.warehouse.connection, study)

    def breakdown(self, study: str | None = None) -> alt.TopLevelMixin:
        """Step time per scale point, split into compute, exposed communication, other and idle (ms)."""
        from tracehouse.reports.charts import breakdown

        return offline(
            breakdown.step_breakdown_chart(
                breakdown.breakdown_rows(self.warehouse.connection, self._study(study))
            )
        )

    def breakdown_share(self, study: str | None = None) -> alt.TopLevelMixin:
        """The same split as shares of the step."""
        from tracehouse.reports.charts import breakdown

        return offline(
            breakdown.breakdown_share_chart(
                breakdown.breakdown_rows(self.warehouse.connection, self._study(study))
            )
        )

    def waits_by_collective(self, study: str | None = None) -> alt.TopLevelMixin:
        """Exposed communication per step and scale point, by parallel dimension and op."""
        from tracehouse.reports.charts import waits

        return offline(
            waits.collective_chart(waits.collective_rows(self.warehouse.connection, self._study(study)))
        )

    def waits_by_kind(self, study: str | None = None) -> alt.TopLevelMixin:
        """Exposed communication split into wait and transfer, and idle split by cause, per scale point."""
        from tracehouse.reports.charts import waits

        return offline(waits.kind_chart(waits.kind_rows(self.warehouse.connection, self._study(study))))

    def roofline(self, study: str | None = None) -> alt.TopLevelMixin:
        """Each run's top ops: achieved FLOP/s against intensity, sized by time, with their roofline bound."""
        from tracehouse.reports.charts import inside

        return offline(inside.roofline_chart(self.warehouse.connection, self._study(study)))

    def critical_path(self, study: str | None = None) -> alt.TopLevelMixin:
        """The critical path of the slowest step of each strategy's largest run, on the ranks it visits."""
        from tracehouse.reports.charts import inside

        return offline(inside.path_chart(self.warehouse.connection, self._study(study)))

    def throughput(self, study: str | None = None) -> alt.TopLevelMixin:
        """Tokens per second against devices, with the ideal line."""
        from tracehouse.reports.charts import scaling

        return offline(scaling.throughput_chart(self.warehouse.connection, self._study(study)))

    def per_device(self, study: str | None = None) -> alt.TopLevelMixin:
        """Throughput per device and MFU against devices."""
        from tracehouse.reports.charts import scaling

        return offline(scaling.per_device_chart(self.warehouse.connection, self._study(study)))

    def efficiency(self, study: str | None = None) -> alt.TopLevelMixin:
        """Scaling efficiency and marginal throughput per added device."""
        from tracehouse.reports.charts import scaling

        return offline(scaling.efficiency_chart(self.warehouse.connection, self._study(study)))

    def projected_throughput(self, study: str | None = None) -> alt.TopLevelMixin:
        """Projected tokens/s per device against devices per run and scenario, the knee marked."""
        from tracehouse.reports.charts import projection

        return offline(projection.throughput_chart(self.warehouse.connection, self._study(study)))

    def projected_breakdown(self, study: str | None = None) -> alt.TopLevelMixin:
        """The projected step split into compute / exposed communication / other / idle per world size."""
        from tracehouse.reports.charts import projection

        return offline(projection.breakdown_chart(self.warehouse.connection, self._study(study)))

    def power(self, study: str | None = None) -> alt.TopLevelMixin:
        """Power per device and tokens per joule against devices."""
        from tracehouse.reports.charts import power

        return offline(power.power_chart(self.warehouse.connection, self._study(study)))

    def busbw(self, study: str | None = None) -> alt.TopLevelMixin:
        """Collective bus bandwidth against message size."""
        from tracehouse.reports.charts import collectives

        return offline(collectives.busbw_chart(self.warehouse.connection, self._study(study)))

    def rank_heatmap(self, study: str | None = None) -> alt.TopLevelMixin:
        """Step time per rank and step at the largest scale point."""
        from tracehouse.reports.charts import ranks

        return offline(ranks.rank_heatmap_chart(self.warehouse.connection, self._study(study)))

    def top_kernels(self, study: str | None = None) -> alt.TopLevelMixin:
        """The kernels or ops with the most time per rank, per run."""
        from tracehouse.reports.charts import kernels

        return offline(kernels.top_kernels_chart(self.warehouse.connection, self._study(study)))
