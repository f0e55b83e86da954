"""Folders load as users have them: without a manifest, a folder splits into runs by distributedInfo.

A trace without distributedInfo (or of a world of one) is a run of its own, named after the
file; the others group by world size, a rank claimed twice splits a group by file-name pattern,
and a run with fewer traces than its world size loads with a warning (`trace_coverage.run_coverage`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import duckdb
import pytest
from support.wh_helpers import write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.discovery.grouping import file_run_name, group_folder
from tracehouse.pipeline.discovery.header import HEAD_BYTES, TraceHeader, read_header
from tracehouse.pipeline.discovery.sniff import SNIFF_BYTES
from tracehouse.pipeline.ingest.driver import ingest


def rows(warehouse: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as c:
        c.execute("SET file_search_path = ?", [str(warehouse)])
        return c.sql(sql).fetchall()


def header(
    rank: int | None = None, world_size: int | None = None, *, distributed: bool = True
) -> TraceHeader:
    return TraceHeader(decided=True, distributed=distributed, rank=rank, world_size=world_size)


NONE = TraceHeader(decided=True, distributed=False)


def groups_of(directory: Path, headers: dict[str, TraceHeader], stated: dict[str, int] | None = None):
    paths = {directory / name: h for name, h in headers.items()}
    stated_paths = {directory / name: r for name, r in (stated or {}).items()}
    found = group_folder(directory, sorted(paths), paths, stated_paths)
    return {g.run_id: (sorted(p.name for p in g.traces), g.single_process) for g in found}


def test_a_trace_without_distributed_info_is_a_run_of_its_own(tmp_path):
    got = groups_of(tmp_path / "traces", {"a.json": NONE, "b.pt.trace.json.gz": NONE})
    assert got == {"a": (["a.json"], True), "b": (["b.pt.trace.json.gz"], True)}


def test_a_world_of_one_is_a_run_of_its_own(tmp_path):
    got = groups_of(tmp_path / "hta", {"x.json": header(0, 1), "y.json": header(0, 1)})
    assert got == {"x": (["x.json"], True), "y": (["y.json"], True)}


def test_ranks_of_one_world_size_form_the_folders_run(tmp_path):
    got = groups_of(tmp_path / "job7", {"r0.json": header(0, 4), "r1.json": header(1, 4), "c.json": NONE})
    assert got == {"c": (["c.json"], True), "job7": (["r0.json", "r1.json"], False)}


def test_several_world_sizes_are_several_runs_named_after_their_files(tmp_path):
    got = groups_of(
        tmp_path / "hta",
        {
            "pair_rank-0.json": header(0, 128),
            "pair_rank-1.json": header(1, 128),
            "cfg_rank0.json": header(0, 2),
        },
    )
    assert got == {
        "pair": (["pair_rank-0.json", "pair_rank-1.json"], False),
        "cfg_rank0": (["cfg_rank0.json"], False),
    }


def test_a_rank_claimed_twice_splits_by_name_pattern_then_file_by_file(tmp_path):
    got = groups_of(
        tmp_path / "mixed",
        {
            "job_rank0_of8.json": header(0, 8),
            "job_rank1_of8.json": header(1, 8),
            "b_rank0_of8.json": header(0, 8),
            "t0.json": header(0, 8),
            "t1.json": header(0, 8),
        },
    )
    assert got == {
        "job": (["job_rank0_of8.json", "job_rank1_of8.json"], False),
        "b_rank0_of8": (["b_rank0_of8.json"], False),
        "t0": (["t0.json"], False),
        "t1": (["t1.json"], False),
    }


def test_a_stated_rank_keeps_a_file_in_its_folders_run(tmp_path):
    got = groups_of(tmp_path / "run", {"a.json": NONE, "b.json": NONE}, stated={"a.json": 0, "b.json": 1})
    assert got == {"run": (["a.json", "b.json"], False)}


def test_file_run_names_drop_the_trace_suffixes():
    assert file_run_name(Path("resnet50_v100_2021.pt.trace.json.gz")) == "resnet50_v100_2021"
    assert file_run_name(Path("rank-0.Apr_03.1102.pt.trace.json")) == "rank-0.Apr_03.1102"


def test_the_header_is_read_from_the_head_only(tmp_path):
    def written(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
        return path

    info = '{"schemaVersion": 1, "distributedInfo": {"rank": 3, "world_size": 8}, "traceEvents": []}'
    assert read_header(written("a.json.gz", info)) == header(3, 8)
    assert read_header(written("b.json", '{"traceEvents": [], "distributedInfo": {"rank": 1}}')) == NONE
    assert read_header(written("c.json", '[{"ph": "X"}]')) == NONE
    assert (
        read_header(
            written("d.json", '{"distributedInfo": {"rank": true, "world_size": 2.0}, "traceEvents": []}')
        )
        == header()
    )
    assert not read_header(
        written("e.json", '{"distributedInfo": {"rank": 1, "pad": "' + "x" * SNIFF_BYTES)
    ).decided
    # decided after the first HEAD_BYTES: the info comes later, within the sniffed megabyte
    late = (
        '{"deviceProperties": "'
        + "y" * HEAD_BYTES
        + '", "distributedInfo": {"rank": 2, "world_size": 4}, "traceEvents": []}'
    )
    assert read_header(written("f.json", late)) == header(2, 4)


def test_a_folder_of_unrelated_traces_loads_every_file(tmp_path):
    folder = tmp_path / "traces"
    write_trace(folder / "solo.json", rank=None)
    write_trace(folder / "other.json.gz", rank=None)
    write_trace(folder / "job_rank0.json", rank=0, world_size=2)
    write_trace(folder / "job_rank1.json", rank=1, world_size=2)
    write_trace(folder / "big_rank0_of8.json", rank=0, world_size=8)
    wh = tmp_path / "wh"
    summary = ingest([folder], wh)
    assert (summary.loaded, summary.failed) == (5, [])
    assert sorted(summary.runs) == ["default/big_rank0_of8", "default/job", "default/other", "default/solo"]
    got = rows(wh, "SELECT run_id, rank, rank_source FROM traces ORDER BY run_id, rank")
    assert got == [
        ("big_rank0_of8", 0, "distributedInfo"),
        ("job", 0, "distributedInfo"),
        ("job", 1, "distributedInfo"),
        ("other", 0, "single-process"),
        ("solo", 0, "single-process"),
    ]
    partial = "partial run: traces of 1 of its 8 ranks; its step times and breakdowns cover those ranks only"
    assert summary.warnings == [f"run default/big_rank0_of8: {partial}"]
    coverage = rows(
        wh,
        "SELECT run_id, run_world_size, run_rank_traces, run_coverage "
        "FROM trace_coverage ORDER BY run_id, rank",
    )
    assert coverage == [
        ("big_rank0_of8", 8, 1, partial),
        ("job", 2, 2, None),
        ("job", 2, 2, None),
        ("other", 1, 1, None),
        ("solo", 1, 1, None),
    ]


def test_a_file_name_taken_by_another_run_gets_its_folders_name(tmp_path):
    write_trace(tmp_path / "a" / "trace.json", rank=None)
    write_trace(tmp_path / "b" / "trace.json", rank=None)
    summary = ingest([tmp_path / "a", tmp_path / "b"], tmp_path / "wh")
    assert summary.failed == [] and summary.runs == ["default/trace", "default/b-trace"]


def test_a_runs_only_trace_without_distributed_info_is_rank_0_of_a_named_run(tmp_path):
    trace = write_trace(tmp_path / "x" / "t.json", rank=None)
    summary = ingest([trace], tmp_path / "wh", run="mine", study="s")
    assert summary.failed == [] and summary.runs == ["s/mine"]
    assert rows(tmp_path / "wh", "SELECT run_id, rank, rank_source FROM traces") == [
        ("mine", 0, "single-process")
    ]


def test_two_traces_without_distributed_info_in_a_named_run_still_need_ranks(tmp_path):
    write_trace(tmp_path / "x" / "a.json", rank=None)
    write_trace(tmp_path / "x" / "b.json", rank=None)
    summary = ingest([tmp_path / "x"], tmp_path / "wh", run="mine")
    assert sorted(reason.split(":")[0] for _, reason in summary.failed) == ["no rank", "no rank"]


def test_run_facts_stated_on_the_command_line(tmp_path, capsys):
    folder = tmp_path / "elsewhere"
    write_trace(folder / "solo.json", rank=None)
    doc = json.loads((folder / "solo.json").read_text())
    doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    (folder / "solo.json").write_text(json.dumps(doc))
    wh = tmp_path / "wh"
    args = ["ingest", str(folder), "--warehouse", str(wh), "--global-batch", "8", "--seq-len", "512"]
    assert main([*args, "--model", "tiny", "--dtype", "bf16", "--strategy", "ddp"]) == 0
    facts = (
        "SELECT model, tokens_per_step, strategy, dtype, peak_flops, peak_flops_source, "
        "n_params > 0, flops_per_token > 0 FROM runs"
    )
    assert rows(wh, facts) == [("tiny", 4096, "ddp", "bf16", 989.4e12, "device table", True, True)]
    # stating one fact again keeps the others; a bad value is one line naming the option
    assert main(["ingest", str(folder), "--warehouse", str(wh), "--tokens-per-step", "8192"]) == 0
    assert rows(wh, "SELECT model, tokens_per_step, dtype FROM runs") == [("tiny", 8192, "bf16")]
    # MFU of a run without a manifest: the stated FLOPs per token over the device table's peak
    [(tps, fpt, mfu)] = rows(
        wh, "SELECT s.tokens_per_s, r.flops_per_token, s.mfu FROM scale_points s JOIN runs r USING (run_id)"
    )
    from tracehouse.collectors.model_sizes import MODELS, flops_per_token

    assert fpt == flops_per_token(MODELS["tiny"], 512)
    assert mfu == pytest.approx(tps * fpt / 989.4e12, rel=1e-12)
    capsys.readouterr()
    assert main(["ingest", str(folder), "--warehouse", str(wh), "--seq-len", "0"]) == 2
    assert (
        capsys.readouterr().err.strip().splitlines()[-1]
        == "tracehouse ingest: error: --seq-len: must be positive, got 0"
    )


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("AMD Instinct MI300X", "MI300X"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
    ],
)
def test_device_names_as_kineto_writes_them_match_the_peak_table(name, key, tmp_path):
    from tracehouse.pipeline.common.hardware import PEAK_FLOPS, device_key

    assert device_key(name) == key
    trace = write_trace(tmp_path / "t.json", rank=None)
    doc = json.loads(trace.read_text())
    doc["deviceProperties"] = [{"id": 0, "name": name}]
    trace.write_text(json.dumps(doc))
    ingest([trace], tmp_path / "wh", facts={"dtype": "fp32"})
    assert rows(tmp_path / "wh", "SELECT peak_flops FROM runs") == [(PEAK_FLOPS[key]["fp32"],)]


@pytest.mark.shared_data
def test_the_public_traces_folder_loads_with_no_failure(shared_data, tmp_path):
    summary = ingest([shared_data / "traces"], tmp_path / "wh")
    n_files = len(list((shared_data / "traces").rglob("*.json.gz")))
    assert (summary.loaded, summary.failed) == (n_files, [])
    got = dict(rows(tmp_path / "wh", "SELECT run_id, list(rank ORDER BY rank) FROM traces GROUP BY run_id"))
    assert got["pair_sampled"] == [0, 1]  # two ranks of one 128-rank job
    assert got["mi300_ddp_rank0_of8"] == [0] and got["b200_vllm_eager_rank0_of8"] == [0]  # rank 0 each
    assert len(got) == n_files - 1
    partial = sorted(w.split(":")[0] for w in summary.warnings if "partial run" in w)
    assert partial == [
        "run default/b200_vllm_eager_rank0_of8",
        "run default/mi300_ddp_rank0_of8",
        "run default/nccl_parser_config_rank0",
        "run default/pair_sampled",
    ]
