"""The query sandbox: `tracehouse query`, `wh.sql()` and the report read the warehouse and nothing else.

Every statement of the list is refused with one line and writes nothing: the file system is
listed before and after (the warehouse folder, a scratch folder, the targets named), and the
warehouse is then checked whole (`tracehouse check`). The public views and the README's queries
still answer, through the same sandbox.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

import pytest
from support.testdata import REPO
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.warehouse.view_docs import load_contracts

# What an adversarial query would try ({wh}: the warehouse, {part}: a partition, {out}: a scratch dir).
HOSTILE = [
    "COPY (SELECT 1) TO '{out}/a.csv'",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}/b.csv'",
    "EXPLAIN ANALYZE COPY (SELECT 1 AS a) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (SELECT 1 AS a) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (SELECT 1 AS a) TO '{wh}/parquet/new.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{out}/export'",
    "EXPLAIN ANALYZE EXPORT DATABASE '{out}/export2'",
    "INSTALL httpfs",
    "EXPLAIN ANALYZE INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "EXPLAIN ANALYZE SET memory_limit = '1GB'",
    "SET lock_configuration = false",
    "RESET enable_external_access",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM read_blob('/proc/self/environ')",
    "SELECT * FROM read_parquet('{part}')",
    "SELECT * FROM read_json_auto('{out}/../x.json')",
    "ATTACH '{out}/other.duckdb' AS other",
    "ATTACH '{wh}/tracehouse.duckdb' AS again",
    "CREATE TABLE t AS SELECT 1",
    "INSERT INTO traces SELECT * FROM traces",
    "DELETE FROM run_manifests",
    "DROP VIEW step_breakdown",
    "CHECKPOINT",
    "PRAGMA enable_profiling = 'json'",
    "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "SELECT 1; COPY (SELECT 1) TO '{out}/c.csv'",
]


def listing(*folders: Path) -> dict[str, tuple[int, int]]:
    """Every file under the folders with its size and modification time (ns)."""
    found = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                stat = path.stat()
                found[str(path)] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.fixture
def hostile_setup(sample_warehouse, tmp_path):
    wh = tmp_path / "wh"
    shutil.copytree(sample_warehouse, wh)
    out = tmp_path / "out"
    out.mkdir()
    part = next((wh / "parquet" / "events").rglob("*.parquet"))
    return wh, out, part


@pytest.mark.parametrize("statement", HOSTILE)
def test_every_hostile_statement_is_refused_in_one_line_and_writes_nothing(statement, hostile_setup, capsys):
    wh, out, part = hostile_setup
    sql = statement.format(wh=wh, out=out, part=part)
    before = listing(wh, out)
    capsys.readouterr()
    assert main(["query", sql, "--warehouse", str(wh)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("tracehouse query: error: ")
    assert listing(wh, out) == before
    assert main(["check", "--warehouse", str(wh)]) == 0


def test_the_python_api_is_held_to_the_same_rule(hostile_setup):
    import tracehouse

    wh, out, part = hostile_setup
    before = listing(wh, out)
    with tracehouse.open(wh) as handle:
        for statement in HOSTILE[:7]:
            with pytest.raises(tracehouse.WarehouseError):
                handle.sql(statement.format(wh=wh, out=out, part=part)).fetchall()
        assert handle.sql("SELECT count(*) FROM events").fetchall()[0][0] > 0  # the raw views answer
    assert listing(wh, out) == before


def test_every_public_view_and_raw_view_still_answers(sample_warehouse, capsys):
    names = [c.relation for c in load_contracts()] + ["events", "steps", "collectives", "threads"]
    for name in names:
        capsys.readouterr()
        assert main(["query", f"SELECT count(*) FROM {name}", "--warehouse", str(sample_warehouse)]) == 0, (
            name
        )


def test_the_readme_queries_still_answer(sample_warehouse, capsys):
    readme = (REPO / "README.md").read_text()
    queries = [q for q in re.findall(r'tracehouse query "([^"]+)"', readme) if q != "SQL"]
    assert len(queries) >= 4
    for sql in queries:
        capsys.readouterr()
        assert main(["query", " ".join(sql.split()), "--warehouse", str(sample_warehouse)]) == 0, sql


def test_reading_other_files_is_an_explicit_choice(sample_warehouse, tmp_path, capsys):
    data = tmp_path / "mine"
    data.mkdir()
    (data / "t.csv").write_text("a,b\n1,2\n")
    sql = f"SELECT sum(a + b) AS s FROM read_csv('{data}/t.csv')"
    assert main(["query", sql, "--warehouse", str(sample_warehouse)]) == 2
    capsys.readouterr()
    assert (
        main(["query", sql, "--warehouse", str(sample_warehouse), "--allow-files", str(data), "--json"]) == 0
    )
    assert '"s": 3' in capsys.readouterr().out
    os.remove(data / "t.csv")


def test_the_sandbox_holds_without_the_statement_filter(hostile_setup):
    """The controls are DuckDB's own: on a sealed connection, with no filter in front, nothing is written."""
    from tracehouse.pipeline.warehouse.reading import open_sealed

    wh, out, part = hostile_setup
    home = Path.home() / ".duckdb"
    before = listing(wh, out, *([home] if home.exists() else []))
    with open_sealed(wh) as connection:
        for statement in HOSTILE:  # refused by DuckDB or harmless: what matters is the disk after
            with contextlib.suppress(Exception):
                connection.execute(statement.format(wh=wh, out=out, part=part))
    assert listing(wh, out, *([home] if home.exists() else [])) == before
    assert not any(out.iterdir())
