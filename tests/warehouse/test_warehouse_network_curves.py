"""nccl-tests output through `tracehouse ingest` into network_curve_points, network_files and the public
view network_curves, beside the collective instances of traced runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from support.testdata import shared_path
from support.wh_helpers import write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.parsers.nccl_tests.parse import parse_nccl_tests
from tracehouse.pipeline.parsers.nccl_tests.result import POINT_COLUMNS
from tracehouse.pipeline.warehouse.database import connect
from tracehouse.pipeline.warehouse.sql_runner import load_sql_files

FAILURE = "xxrjun-h100-2node-failure.txt"
KEYS = ("content_hash", "study", "path", "source")
TABLES = ("network_curve_points", "network_files", "ingest_errors")


@pytest.fixture(scope="module")
def folder() -> Path:
    """../shared/data/nccl-tests (read in place)."""
    return shared_path("nccl-tests")


def outputs(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.txt") if p.name != FAILURE)


def rows(warehouse: Path, sql: str, params: list | None = None) -> list[tuple]:
    with connect(warehouse, read_only=True) as c:
        return c.execute(sql, params or []).fetchall()


def contents(warehouse: Path) -> dict[str, list[tuple]]:
    """Every row of the nccl-tests tables and ingest_errors, ingest times left out."""
    out = {}
    with connect(warehouse, read_only=True) as c:
        for table in TABLES:
            names = [r[0] for r in c.sql(f"DESCRIBE {table}").fetchall() if r[0] not in ("ingested_at", "at")]
            out[table] = c.sql(f"SELECT {', '.join(names)} FROM {table} ORDER BY ALL").fetchall()
    return out


def ingest_cli(paths: list[Path], warehouse: Path, capsys, *options: str) -> tuple[int, dict, str]:
    code = main(["ingest", *map(str, paths), "--warehouse", str(warehouse), "--json", *options])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_the_shared_folder_loads_every_table_and_fails_the_failure_file(folder, tmp_path, capsys):
    warehouse = tmp_path / "wh"
    code, summary, err = ingest_cli([folder], warehouse, capsys, "--study", "cluster")
    failure = str(folder / FAILURE)
    reason = "no result table (the test failed: 'remote process exited or there was a network error')"
    assert code == 1
    assert summary["failed"] == [{"path": failure, "reason": reason, "internal": False}]
    assert (summary["nccl_tests_files"], summary["loaded"], summary["not_traces"]) == (9, 0, [])
    assert f"error: {failure}: {reason}" in err
    assert "0 loaded, 0 skipped, 1 failed, 0 events, 0 power logs, 9 nccl-tests files in" in err
    assert rows(warehouse, "SELECT path, reason FROM ingest_errors") == [(failure, reason)]
    for path in outputs(folder):
        parsed = parse_nccl_tests(path)
        expected = parsed.frame().height
        assert expected == parsed.n_points > 0
        assert rows(warehouse, "SELECT count(*) FROM network_curve_points WHERE path = ?", [str(path)]) == [
            (expected,)
        ]
        assert rows(
            warehouse,
            "SELECT study, source, n_tests, n_points, programs, failures FROM network_files WHERE path = ?",
            [str(path)],
        ) == [("cluster", "nccl-tests", 1, expected, parsed.tests[0].program, "[]")]
    by_file = rows(
        warehouse,
        "SELECT regexp_extract(path, '[^/]+$'), op, ranks, nodes, count(*), min(bytes), max(bytes) "
        "FROM network_curves WHERE source = 'nccl-tests' GROUP BY ALL ORDER BY 1",
    )
    assert by_file == [
        ("awsdoeks-t4-2node-efa-allreduce-tagged.txt", "all_reduce", 2, 2, 62, 0, 2**30),
        ("deepops-dgxa100-2node-ib-allreduce-tableonly.txt", "all_reduce", 16, None, 60, 8, 2**32),
        ("superbench-a100-8gpu-allgather-v2old.txt", "all_gather", 8, 1, 68, 0, 2**33),
        ("superbench-a100-8gpu-allreduce-v2old.txt", "all_reduce", 8, 1, 68, 0, 2**33),
        ("superbench-a100-8gpu-alltoall-v2old.txt", "all_to_all", 8, 1, 68, 0, 2**33),
        ("superbench-a100-8gpu-broadcast-v2old.txt", "broadcast", 8, 1, 68, 0, 2**33),
        ("superbench-a100-8gpu-reducescatter-v2old.txt", "reduce_scatter", 8, 1, 68, 0, 2**33),
        ("xxrjun-h100-2node-alltoall-v2.17.txt", "all_to_all", 16, 2, 20, 2**25, 2**34),
        ("xxrjun-h100-2node-sendrecv-v2.17.txt", "send_recv", 16, 2, 20, 2**25, 2**34),
    ]
    assert rows(warehouse, "SELECT DISTINCT study, run_id, source FROM network_curves") == [
        ("cluster", None, "nccl-tests")
    ]


def test_ingesting_again_changes_nothing(folder, tmp_path, capsys):
    warehouse = tmp_path / "wh"
    ingest_cli([folder], warehouse, capsys)
    before = contents(warehouse)
    code, summary, _ = ingest_cli([folder], warehouse, capsys)
    assert (code, summary["skipped"], summary["nccl_tests_files"], len(summary["failed"])) == (1, 9, 0, 1)
    assert contents(warehouse) == before
    assert len(before["network_curve_points"]) == sum(parse_nccl_tests(p).n_points for p in outputs(folder))
    code, summary, _ = ingest_cli(outputs(folder)[:2], warehouse, capsys)  # named files: skipped too
    assert (code, summary["skipped"]) == (0, 2)
    assert contents(warehouse) == before


def test_the_points_table_holds_the_parser_columns_after_its_keys():
    [table] = [f for f in load_sql_files() if f.name == "network_curve_points"]
    with duckdb.connect() as c:
        c.execute(table.text)
        described = c.sql("DESCRIBE network_curve_points").fetchall()
    assert [name for name, *_ in described] == [*KEYS, *POINT_COLUMNS]


def test_text_files_beside_traces_are_left_alone_and_a_named_output_is_read(folder, tmp_path, capsys):
    """A run folder's training log is no nccl-tests output (not read, not named); the manifest's study
    wins over --study, as it does for traces."""
    run = tmp_path / "run"
    write_trace(run / "rank0.json", rank=0, world_size=1)
    (run / "train.log").write_text("step 1 loss 2.5\nstep 2 loss 2.4\n")
    (run / "notes.txt").write_text("# size count type: see the wiki\n")
    shutil.copy(folder / "superbench-a100-8gpu-allreduce-v2old.txt", run / "nccl_allreduce.log")
    (run / "manifest.json").write_text(json.dumps({"study": "s1", "run_id": "r1"}))
    alone = tmp_path / "elsewhere" / "sendrecv.out"
    alone.parent.mkdir()
    shutil.copy(folder / "xxrjun-h100-2node-sendrecv-v2.17.txt", alone)
    warehouse = tmp_path / "wh"
    code, summary, _ = ingest_cli([run, alone], warehouse, capsys, "--study", "given")
    assert (code, summary["loaded"], summary["nccl_tests_files"], summary["not_traces"]) == (0, 1, 2, [])
    assert rows(warehouse, "SELECT regexp_extract(path, '[^/]+$'), study FROM network_files ORDER BY 1") == [
        ("nccl_allreduce.log", "s1"),
        ("sendrecv.out", "given"),
    ]


def test_a_file_with_a_failed_test_loads_its_results_with_a_warning(folder, tmp_path, capsys):
    failure = (folder / FAILURE).read_text().split("\n")
    second = failure.index("# Collective test starting: sendrecv_perf") - 1
    good = (folder / "xxrjun-h100-2node-sendrecv-v2.17.txt").read_text()
    mixed = tmp_path / "in" / "mixed.txt"
    mixed.parent.mkdir()
    mixed.write_text("\n".join(failure[:second]) + "\n" + good)
    code, summary, err = ingest_cli([mixed.parent], tmp_path / "wh", capsys)
    warning = f"{mixed}: alltoall_perf failed: 'remote process exited or there was a network error'"
    assert (code, summary["nccl_tests_files"], summary["warnings"]) == (
        0,
        1,
        [f"{warning}; its other results are loaded"],
    )
    assert f"warning: {warning}" in err
    assert rows(
        tmp_path / "wh", "SELECT n_tests, n_points, json_array_length(failures) FROM network_files"
    ) == [(2, 20, 1)]


def test_the_sample_studys_collective_instances_are_trace_points(sample_warehouse):
    """One network_curves row per measured instance of collective_instances, whatever its ranks."""
    instances = rows(
        sample_warehouse,
        """SELECT study, run_id, process_group, instance_no, min(op), count(DISTINCT op),
                  coalesce(max(group_size), max(n_ranks)), max(bytes), min(transfer_us), min(busbw_gbps)
           FROM collective_instances WHERE transfer_us IS NOT NULL GROUP BY ALL ORDER BY ALL""",
    )
    traced = rows(
        sample_warehouse,
        """SELECT study, run_id, process_group, instance_no, op, ranks, bytes, time_us, busbw_gbps,
                  nodes, in_place, path, program
           FROM network_curves WHERE source = 'trace' ORDER BY ALL""",
    )
    assert len(instances) == len(traced) > 100
    p2p = 0
    for instance, point in zip(instances, traced, strict=True):
        assert point[:4] == instance[:4]
        if instance[5] == 1:
            assert point[4] == instance[4]
        else:  # pipeline parallel: a send on one rank matched with the recv on the other
            assert (instance[4], instance[5], point[4]) == ("recv", 2, "send_recv")
            p2p += 1
        assert point[5:9] == instance[6:10]
        assert point[9:] == (1, None, None, None)  # the sample runs are single-node
    assert p2p > 0
    nodes = rows(sample_warehouse, "SELECT DISTINCT nodes FROM runs")
    assert nodes == [(1,)]
