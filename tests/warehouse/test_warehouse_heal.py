"""Re-ingest heals, `tracehouse check` finds the damage, `tracehouse forget` removes a run whole.

Damage is real: partitions deleted, truncated, a byte flipped, replaced by another valid Parquet
file (what `COPY ... TO` over a partition would leave).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from support.testdata import SAMPLE_TRACES
from support.wh_helpers import checksums, count
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.ingest.driver import ingest

STUDY = SAMPLE_TRACES / "tiny-cpu-gloo"
RUN = STUDY / "ddp-ws2"


def partitions(wh: Path, table: str, run_id: str) -> list[Path]:
    return sorted((wh / "parquet" / table).glob(f"study=*/run_id={run_id}/**/*.parquet"))


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def other_rows(path: Path) -> None:
    """Overwrite a partition with a valid Parquet file holding its first row only."""
    with duckdb.connect() as c:
        c.execute(f"COPY (SELECT * FROM read_parquet('{path}') LIMIT 1) TO '{path}.new' (FORMAT parquet)")
    Path(f"{path}.new").replace(path)


DAMAGE = {
    "missing": lambda p: p.unlink(),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:100]),
    "a byte flipped": flip_a_byte,
    "other rows": other_rows,
}


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    wh = tmp_path_factory.mktemp("clean") / "wh"
    assert ingest([RUN], wh).loaded == 2
    return wh


@pytest.mark.parametrize("kind", DAMAGE)
def test_check_names_the_damage_and_ingesting_again_repairs_it(kind, clean, tmp_path, capsys):
    wh = tmp_path / "wh"
    shutil.copytree(clean, wh)
    damaged = partitions(wh, "events", "ddp-ws2")[0]
    DAMAGE[kind](damaged)
    capsys.readouterr()
    assert main(["check", "--warehouse", str(wh), "--json"]) == 1
    out, err = capsys.readouterr()
    [found] = json.loads(out)["damaged"]
    assert found["path"] == damaged.relative_to(wh).as_posix() and found["table"] == "events"
    assert found["source"] == str(RUN / "rank0.pt.trace.json.gz")
    assert f"ingest their sources again to repair them: tracehouse ingest {found['source']}" in err
    summary = ingest([RUN], wh)
    assert (summary.repaired, summary.skipped, summary.loaded) == ([found["source"]], 1, 0)
    assert main(["check", "--warehouse", str(wh)]) == 0
    # 2 traces x (events, steps, collectives, threads, process groups, ops, op_calls)
    assert "14 partitions verified, none damaged" in capsys.readouterr().err
    assert checksums(wh) == checksums(clean)


def test_an_ingest_of_other_files_repairs_a_missing_partition_only_when_given_its_file(clean, tmp_path):
    wh = tmp_path / "wh"
    shutil.copytree(clean, wh)
    partitions(wh, "steps", "ddp-ws2")[0].unlink()
    assert ingest([STUDY / "ddp-ws1"], wh).repaired == []  # not given: left for check to report
    assert ingest([RUN], wh).repaired == [str(RUN / "rank0.pt.trace.json.gz")]


def test_forget_removes_a_run_as_if_it_never_was(tmp_path, capsys):
    whole, without = tmp_path / "whole", tmp_path / "without"
    ingest([STUDY / "ddp-ws1", RUN, STUDY / "fsdp-ws2"], whole)
    ingest([STUDY / "ddp-ws1", STUDY / "fsdp-ws2"], without)
    capsys.readouterr()
    assert main(["forget", "ddp-ws2", "--warehouse", str(whole)]) == 0
    assert capsys.readouterr().out.strip() == (
        "forgot run tiny-cpu-gloo/ddp-ws2: 2 traces, 0 power logs, 14 Parquet files"
    )
    assert checksums(whole) == checksums(without)
    for relation in (
        "step_breakdown",
        "scale_points",
        "comm_exposure",
        "runs",
        "op_calls_healed",
        "op_calls",
    ):
        assert count(whole, f"{relation} WHERE run_id = 'ddp-ws2'") == 0
        assert count(whole, relation) == count(without, relation)
    assert not (whole / "parquet" / "events" / "study=tiny-cpu-gloo" / "run_id=ddp-ws2").exists()
    assert main(["forget", "ddp-ws2", "--warehouse", str(whole)]) == 2
    assert "no run 'ddp-ws2' in any study" in capsys.readouterr().err
    assert ingest([RUN], whole).loaded == 2  # it comes back
    assert main(["forget", "ddp-ws2", "--warehouse", str(whole / "nowhere")]) == 2
    assert "no warehouse here" in capsys.readouterr().err and not (whole / "nowhere").exists()
