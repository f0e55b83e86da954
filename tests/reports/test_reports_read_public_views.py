"""The report reads public relations only (DESIGN.md: `reports/` "reads views only").

The rule, for every statement a report issues:
* it may name the public views: those DESIGN.md lists (PUBLIC_BY_DESIGN, including ones not
  built yet) and every relation with a contract under sql/views (`*.contract.toml`, the
  relations docs/views.md documents; the marts such as top_kernels and power_coverage);
* the provenance section may also name the file registers `traces` and `power_files`, the
  DuckDB tables docs/warehouse.md documents: listing the files a report came from is its job;
* it may call the catalog functions duckdb_tables(), duckdb_views() and duckdb_columns() (to
  ask whether a relation or a column exists) and no other table function (read_parquet would
  reach past the views);
* it must be a SELECT: anything else cannot be checked, so it fails.
A view may read anything; the rule is about the names a report's own SQL uses.

How: DuckDB's query log records every statement a report issues while it is built on a real
warehouse; json_serialize_sql parses each one, and the BASE_TABLE nodes of its syntax tree,
less the query's own CTE names, are the relations it names. open_warehouse's snapshot
(`CREATE TEMP TABLE name AS SELECT * FROM main.name`) runs before a log can be switched on,
so its list of names is checked directly.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from support.testdata import PUBLIC_BY_DESIGN
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.pipeline.warehouse.view_docs import load_contracts
from tracehouse.reports.build import build_page
from tracehouse.reports.provenance import provenance_tables
from tracehouse.reports.source import (
    REQUIRED_VIEWS,
    SNAPSHOT_VIEWS,
    frame,
    has_relation,
    open_warehouse,
    pick_study,
)

PUBLIC = PUBLIC_BY_DESIGN | {c.relation for c in load_contracts()}
FILE_REGISTERS = frozenset({"traces", "power_files"})
CATALOG_FUNCTIONS = frozenset({"duckdb_tables", "duckdb_views", "duckdb_columns"})


@contextmanager
def query_log(con: duckdb.DuckDBPyConnection) -> Iterator[list[str]]:
    """The statements run on con inside the block, in order, from DuckDB's query log.

    The log is switched on before the report's connection is sealed (`logged_seal`): the
    sandbox locks the configuration, logging's included.
    """
    statements: list[str] = []
    con.sql("CALL truncate_duckdb_logs()")
    try:
        yield statements
    finally:
        logged = con.sql("SELECT message FROM duckdb_logs WHERE type = 'QueryLog'").fetchall()
        con.sql("CALL truncate_duckdb_logs()")
        own = ("CALL truncate_duckdb_logs()", "SELECT message FROM duckdb_logs WHERE type = 'QueryLog'")
        statements += [m for (m,) in logged if m not in own]


@pytest.fixture(autouse=True)
def logged_seal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's connection logs its queries from before it is sealed."""
    from tracehouse.reports import source

    real = source.seal

    def seal(con: duckdb.DuckDBPyConnection, directory: Path, **options: object) -> None:
        con.sql("CALL enable_logging('QueryLog')")
        real(con, directory, **options)

    monkeypatch.setattr(source, "seal", seal)


def named(con: duckdb.DuckDBPyConnection, statement: str) -> tuple[set[str], set[str]]:
    """The relations and the table functions a SELECT statement names (its CTEs left out)."""
    tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [statement]).fetchall()[0][0])
    if tree["error"]:
        reason = tree["error_message"]
        raise AssertionError(f"a report statement the rule cannot check ({reason}): {statement}")
    tables: set[str] = set()
    functions: set[str] = set()
    ctes: set[str] = set()
    stack: list[object] = [tree["statements"]]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if node.get("type") == "BASE_TABLE":
                tables.add(node["table_name"].lower())
            elif node.get("type") == "TABLE_FUNCTION":
                functions.add(node["function"]["function_name"].lower())
            if isinstance(node.get("cte_map"), dict):
                ctes |= {entry["key"].lower() for entry in node["cte_map"]["map"]}
            stack.extend(node.values())
    return tables - ctes, functions


def violations(con: duckdb.DuckDBPyConnection, statements: list[str], allowed: frozenset[str]) -> list[str]:
    """One line per statement naming a relation or table function outside the allowed ones."""
    found = []
    for statement in statements:
        tables, functions = named(con, statement)
        bad = sorted((tables - allowed) | (functions - CATALOG_FUNCTIONS))
        if bad:
            found.append(f"{', '.join(bad)} in: {' '.join(statement.split())}")
    return found


@pytest.fixture(scope="module")
def projected_warehouse(sample_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sample warehouse with one run projected (the projection section's reads)."""
    target = tmp_path_factory.mktemp("projected") / "warehouse"
    shutil.copytree(sample_warehouse, target)
    argv = ["project", "--warehouse", str(target), "--study", "tiny-cpu-gloo", "--run", "ddp-ws2"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main([*argv, "--world-sizes", "4,16"]) == 0
    return target


@pytest.fixture(params=["hostile_real_warehouse", "sample_warehouse", "dev_warehouse", "projected_warehouse"])
def report_connection(request: pytest.FixtureRequest) -> Iterator[tuple[duckdb.DuckDBPyConnection, str]]:
    """A report's connection (real ingests: GPU, CPU, CPU projected; fabricated with power), its study."""
    con = open_warehouse(request.getfixturevalue(request.param))
    yield con, pick_study(con, None)
    con.close()


def test_every_report_statement_names_public_views_only(report_connection) -> None:
    con, study = report_connection
    with query_log(con) as provenance:
        provenance_tables(con, study)
    query = "SELECT DISTINCT run_id FROM step_breakdown WHERE study = ? ORDER BY 1"
    runs = [r for (r,) in con.execute(query, [study]).fetchall()] if has_relation(con, "run_diff") else []
    compare = (f"{study}/{runs[0]}", f"{study}/{runs[-1]}") if len(runs) > 1 else None
    with query_log(con) as page:
        build_page(con, study, "warehouse", compare=compare)
    assert set(provenance) <= set(page)  # the page's provenance is the section checked on its own
    others = [s for s in page if s not in set(provenance)]
    assert violations(con, others, PUBLIC) == []
    assert violations(con, provenance, PUBLIC | FILE_REGISTERS) == []
    # The log saw the whole page: the charts' and the provenance's reads are all there.
    seen = set().union(*(named(con, s)[0] for s in page))
    assert {"top_kernels", "power_coverage", "scale_points", "runs", "traces", "ingest_errors"} <= seen
    assert compare is None or "run_diff" in seen  # the comparison section, where the study has two runs
    projected = (
        con.sql("SELECT count(*) FROM projections").fetchall()[0][0]
        if has_relation(con, "projections")
        else 0
    )
    assert not projected or "projections" in seen  # the projection section, where the study has projections


def test_the_views_open_warehouse_snapshots_are_public() -> None:
    assert set(SNAPSHOT_VIEWS) <= PUBLIC and set(REQUIRED_VIEWS) <= PUBLIC


def test_a_raw_read_is_caught_wherever_the_query_hides_it(hostile_real_warehouse: Path) -> None:
    con = open_warehouse(hostile_real_warehouse)
    study = pick_study(con, None)
    raw_reads = [
        # run_manifests, in a subquery of WHERE
        "SELECT run_id FROM runs WHERE study = $1 AND run_id IN "
        "(SELECT run_id FROM run_manifests WHERE power IS NOT NULL)",
        # a file register, outside the provenance section
        "SELECT path FROM traces WHERE study = $1",
        # a CTE that takes a raw relation's name reads runs only: no violation
        "WITH events AS (SELECT * FROM runs) SELECT run_id FROM events WHERE study = $1",
    ]
    with query_log(con) as statements:
        for query in raw_reads:
            frame(con, query, study)
    found = violations(con, statements, PUBLIC)
    # the Parquet files themselves the report's connection cannot even read (the query sandbox)
    parquet_reads = [
        "WITH per_run AS (SELECT run_id FROM events WHERE study = $1) "
        "SELECT * FROM per_run JOIN runs USING (run_id)",
        "SELECT count(*) AS n FROM read_parquet('parquet/events/**/*.parquet') WHERE $1 IS NOT NULL",
    ]
    for query in parquet_reads:
        with pytest.raises(WarehouseError, match="file system operations are disabled"):
            frame(con, query, study)
    con.close()
    assert [line.split(" in: ")[0] for line in found] == ["run_manifests", "traces"]


def test_a_statement_that_is_not_a_select_fails_the_rule() -> None:
    with pytest.raises(AssertionError, match="cannot check"):
        named(duckdb.connect(), "CREATE TEMP TABLE x AS SELECT * FROM events")
