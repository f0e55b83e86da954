"""`tracehouse query`: read-only, table / csv / json output, one-line errors."""

from __future__ import annotations

import csv
import io
import json

import pytest
from support.wh_helpers import write_trace
from tracehouse.pipeline.cli.main import main

SQL = (
    "SELECT rank, count(*) AS n, min(name) AS first FROM events "
    "WHERE kind = 'kernel' GROUP BY rank ORDER BY rank"
)
REFUSED = "tracehouse query: error: refused: {} statements would change the warehouse; query is read-only\n"


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    root = tmp_path_factory.mktemp("q")
    write_trace(root / "run" / "r0.json", rank=0, n_kernels=2)
    write_trace(root / "run" / "r1.json", rank=1, n_kernels=3)
    assert main(["ingest", str(root / "run"), "--warehouse", str(root / "wh")]) == 0
    return root / "wh"


def run_query(capsys, wh, sql, fmt):
    capsys.readouterr()
    code = main(["query", sql, "--warehouse", str(wh), "--format", fmt])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_is_an_array_of_row_objects(capsys, wh):
    code, out, _ = run_query(capsys, wh, SQL, "json")
    assert code == 0
    assert json.loads(out) == [{"rank": 0, "n": 2, "first": "gemm_0"}, {"rank": 1, "n": 3, "first": "gemm_0"}]


def test_csv_has_a_header_line(capsys, wh):
    _, out, _ = run_query(capsys, wh, SQL, "csv")
    assert list(csv.reader(io.StringIO(out))) == [
        ["rank", "n", "first"],
        ["0", "2", "gemm_0"],
        ["1", "3", "gemm_0"],
    ]


def test_table_is_aligned(capsys, wh):
    _, out, _ = run_query(capsys, wh, SQL, "table")
    assert out.splitlines() == [
        "rank  n  first",
        "----  -  ------",
        "   0  2  gemm_0",
        "   1  3  gemm_0",
        "(2 rows)",
    ]


@pytest.mark.parametrize(
    "sql, kind",
    [
        ("DELETE FROM traces", "DELETE"),
        ("COPY (SELECT 1) TO 'x.csv'", "COPY"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("SELECT 1; DROP VIEW events", "DROP"),
        ("ATTACH 'other.duckdb'", "ATTACH"),
    ],
)
def test_writes_are_refused_in_one_line(capsys, wh, sql, kind):
    code, out, err = run_query(capsys, wh, sql, "table")
    assert code == 2 and out == ""
    assert err == REFUSED.format(kind)
    assert run_query(capsys, wh, "SELECT count(*) AS n FROM traces", "json")[1].count('"n": 2') == 1


def test_missing_warehouse_is_one_line(capsys, tmp_path):
    code, _, err = run_query(capsys, tmp_path / "none", "SELECT 1", "table")
    assert code == 2
    assert err == (
        f"tracehouse query: error: {tmp_path / 'none'}: no warehouse here (no tracehouse.duckdb); "
        "create one with tracehouse ingest (tracehouse.ingest in Python)\n"
    )


def test_sql_error_is_one_line(capsys, wh):
    code, _, err = run_query(capsys, wh, "SELECT nope FROM traces", "table")
    assert code == 2 and err.count("\n") == 1 and "nope" in err


def test_json_stays_valid_for_any_column_type(capsys, wh):
    uuid = "00000000-0000-0000-0000-000000000001"
    sql = f"SELECT INTERVAL 3 SECOND AS i, 'nan'::DOUBLE AS n, 'inf'::DOUBLE AS f, '{uuid}'::UUID AS u"
    code, out, _ = run_query(capsys, wh, sql, "json")
    assert code == 0
    # strict JSON: NaN / infinity become null, an interval its seconds, a UUID its text
    assert json.loads(out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}")) == [
        {"i": 3.0, "n": None, "f": None, "u": uuid}
    ]


def test_a_reader_that_goes_away_gets_no_traceback(wh):
    import subprocess
    import sys

    command = [sys.executable, "-m", "tracehouse.pipeline.cli", "query", "SELECT * FROM range(200000)"]
    proc = subprocess.Popen(
        [*command, "--warehouse", str(wh), "--format", "csv"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read().decode()
    assert proc.wait() == 141 and "Traceback" not in err
