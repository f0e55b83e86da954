"""The warehouse opens in a plain DuckDB client from any working directory, also after the folder
is moved or copied elsewhere, with every public view answering (and the same rows)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from support.testdata import PUBLIC_BY_DESIGN
from tracehouse.pipeline.warehouse.view_docs import load_contracts

# DESIGN.md's public views that exist yet, plus every relation with a contract.
CONTRACTED = {c.relation for c in load_contracts()}
PUBLIC = sorted(CONTRACTED | (PUBLIC_BY_DESIGN - {"network_curves", "projections"}))

pytestmark = pytest.mark.slow


def answers(db: Path, cwd: Path) -> dict[str, int]:
    """Row counts of every public view, from a fresh interpreter in `cwd` with nothing but duckdb."""
    code = (
        "import duckdb, json, sys\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        f"views = {PUBLIC!r}\n"
        "print(json.dumps({v: con.sql(f'SELECT count(*) FROM {v}').fetchall()[0][0] for v in views}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(db)], cwd=cwd, capture_output=True, text=True, env=os.environ
    )
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1]
    return json.loads(done.stdout)


def test_every_public_view_answers_from_elsewhere_and_after_a_move(sample_warehouse, tmp_path, monkeypatch):
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    with duckdb.connect(str(sample_warehouse / "tracehouse.duckdb"), read_only=True) as c:
        monkeypatch.chdir(sample_warehouse)  # where the relative Parquet paths resolve
        expected = {v: c.sql(f"SELECT count(*) FROM {v}").fetchall()[0][0] for v in PUBLIC}
    assert expected["step_breakdown"] > 0 and expected["collectives"] > 0 and expected["top_kernels"] > 0
    assert answers(sample_warehouse / "tracehouse.duckdb", elsewhere) == expected

    copied = shutil.copytree(sample_warehouse, tmp_path / "copy")
    moved = copied.rename(tmp_path / "moved-warehouse")
    assert answers(moved / "tracehouse.duckdb", elsewhere) == expected


def test_the_raw_views_need_the_folder_as_search_path(sample_warehouse, tmp_path, monkeypatch):
    """Raw Parquet views are relative to the warehouse folder; `SET file_search_path` (what
    tracehouse.open does) makes them answer from anywhere."""
    import tracehouse

    monkeypatch.chdir(tmp_path)
    with duckdb.connect(str(sample_warehouse / "tracehouse.duckdb"), read_only=True) as c:
        with pytest.raises(duckdb.IOException):
            c.sql("SELECT count(*) FROM events").fetchall()
        c.execute("SET file_search_path = ?", [str(sample_warehouse)])
        events = c.sql("SELECT count(*) FROM events").fetchall()[0][0]
    with tracehouse.open(sample_warehouse) as wh:
        assert wh.sql("SELECT count(*) FROM events").fetchall()[0][0] == events > 0
