"""Sweep files: good ones expand to the right scale points; bad ones die in one line before any launch."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracehouse.collectors.slurm import emit_slurm
from tracehouse.collectors.sweep import SweepFileError, load_sweep
from tracehouse.pipeline.cli.main import main

HEAD = 'study = "s"\nmodel = "tiny"\nsteps = 6\nglobal_batch = 8\nseq_len = 64\n'
SAMPLE_SWEEP = Path(__file__).resolve().parents[2] / "sample_traces" / "sweep.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    return path


def test_groups_expand_to_scale_points_with_degrees(tmp_path: Path) -> None:
    text = HEAD + (
        '[[points]]\nstrategies = ["ddp", "pp"]\nworld_sizes = [1, 2]\n'
        '[[points]]\nstrategies = ["fsdp_tp"]\nworld_sizes = [4]\ntp = 2\n'
    )
    specs = load_sweep(write(tmp_path, text.replace('"pp"', '"fsdp"')))
    assert [s.run_id for s in specs] == ["ddp-ws1", "ddp-ws2", "fsdp-ws1", "fsdp-ws2", "fsdp_tp-ws4-tp2"]
    assert [(s.dp, s.tp, s.pp) for s in specs][-1] == (2, 2, 1)
    assert {s.tokens_per_step for s in specs} == {512}  # strong scaling: fixed global batch


def test_the_sample_sweep_is_valid() -> None:
    specs = load_sweep(SAMPLE_SWEEP)
    assert {s.run_id for s in specs} >= {
        "ddp-ws1",
        "ddp-ws2",
        "ddp-ws4",
        "fsdp-ws1",
        "fsdp-ws2",
        "fsdp-ws4",
        "tp-ws2",
        "pp-ws2",
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (HEAD + 'strategies = ["zero3"]\nworld_sizes = [2]\n', "unknown strategy 'zero3'"),
        (HEAD + 'strategies = ["fsdp_tp"]\nworld_sizes = [3]\ntp = 2\n', r"not divisible by tp\*pp = 2\*1"),
        (
            HEAD.replace("seq_len = 64\n", "") + 'strategies = ["ddp"]\nworld_sizes = [2]\n',
            "missing required field 'seq_len'",
        ),
        (HEAD + 'strategies = ["ddp"]\n', "missing required field 'world_sizes'"),
        (HEAD + 'strategies = ["ddp"]\nworld_size = [2]\n', "unknown key 'world_size'"),
        (HEAD + 'strategies = ["ddp"]\nworld_sizes = [3]\n', "global_batch 8 is not divisible by dp 3"),
        (
            HEAD.replace("steps = 6", "steps = 3") + 'strategies = ["ddp"]\nworld_sizes = [1]\n',
            "fewer than the profiler schedule needs",
        ),
        (
            HEAD + '[[points]]\nstrategies = ["tp"]\nworld_sizes = [2]\n' * 2,
            "appears twice",
        ),
        (HEAD + "steps = 6\n", "cannot read sweep file"),
    ],
)
def test_bad_sweep_files_are_rejected_in_one_line(tmp_path: Path, body: str, message: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(SweepFileError, match=message) as info:
        load_sweep(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_cli_rejects_before_launching(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, HEAD + 'strategies = ["ddp", "tp"]\nworld_sizes = [1, 3]\n')
    out = tmp_path / "out"
    assert main(["collect", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "world_size 3" in err[0] and str(path) in err[0]
    assert not out.exists()  # nothing was launched or written


def test_cli_needs_a_sweep_or_point_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collect", "--out", str(tmp_path), "--model", "tiny"]) == 2
    assert "--strategy, --world-size" in capsys.readouterr().err
    assert main(["collect", str(tmp_path / "none.toml"), "--out", str(tmp_path)]) == 2
    assert "no such sweep file" in capsys.readouterr().err


def test_emit_slurm_writes_one_script_per_point(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = HEAD.replace("global_batch = 8", "global_batch = 64")
    path = write(tmp_path, head + 'devices_per_node = 8\nstrategies = ["fsdp"]\nworld_sizes = [8, 16]\n')
    assert main(["collect", str(path), "--out", str(tmp_path / "o"), "--emit", "slurm"]) == 0
    scripts = sorted((tmp_path / "o").glob("*/job.sbatch"))
    assert [p.parent.name for p in scripts] == ["fsdp-ws16-n2", "fsdp-ws8"]
    text = scripts[0].read_text()
    assert "#SBATCH --nodes=2" in text and "#SBATCH --gpus-per-node=8" in text
    assert "srun " in text and "--rdzv-backend c10d" in text and "--nproc_per_node 8" in text
    assert (scripts[0].parent / "run_spec.json").is_file()
    assert not list((tmp_path / "o").glob("*/rank*.json.gz"))


def test_multi_node_points_are_not_run_locally(tmp_path: Path) -> None:
    specs = load_sweep(
        write(tmp_path, HEAD + 'devices_per_node = 1\nstrategies = ["ddp"]\nworld_sizes = [2]\n')
    )
    assert specs[0].nodes == 2
    assert emit_slurm(specs, tmp_path / "o")[0].is_file()


def test_a_world_size_that_does_not_fill_whole_nodes_is_rejected(tmp_path: Path) -> None:
    head = HEAD.replace("global_batch = 8", "global_batch = 48")
    path = write(tmp_path, head + 'devices_per_node = 8\nstrategies = ["fsdp"]\nworld_sizes = [4, 8, 12]\n')
    with pytest.raises(SweepFileError) as info:
        load_sweep(path)
    assert str(info.value) == (
        f"{path}: the top level, fsdp at world_size 12: world_size 12 does not fill whole nodes of "
        "devices_per_node 8; use a multiple of 8 (or at most 8)"
    )
    fits = load_sweep(
        write(tmp_path, head + 'devices_per_node = 8\nstrategies = ["fsdp"]\nworld_sizes = [4, 16]\n')
    )
    assert [(s.world_size, s.nodes) for s in fits] == [(4, 1), (16, 2)]


def test_a_local_sweep_checks_the_gpus_of_this_machine(tmp_path: Path) -> None:
    from tracehouse.collectors.sweep import check_local_devices
    from tracehouse.pipeline.common.errors import TracehouseError

    specs = load_sweep(write(tmp_path, HEAD + 'strategies = ["ddp"]\nworld_sizes = [2, 4]\n'))
    check_local_devices(specs, 0)  # CPU: gloo ranks, as many as asked
    check_local_devices(specs, 8)
    with pytest.raises(TracehouseError) as info:
        check_local_devices(specs, 2)
    assert str(info.value).startswith("ddp-ws4: world_size 4 needs 4 GPUs on this machine, found 2;")


def test_sbatch_scripts_state_cpus_per_task_and_exclusive(tmp_path: Path) -> None:
    head = HEAD.replace("global_batch = 8", "global_batch = 64")
    points = 'devices_per_node = 8\nstrategies = ["fsdp"]\nworld_sizes = [4, 16]\n'
    out = tmp_path / "o"
    assert main(["collect", str(write(tmp_path, head + points)), "--out", str(out), "--emit", "slurm"]) == 0
    two_nodes = (out / "fsdp-ws16-n2" / "job.sbatch").read_text().splitlines()
    # defaults: the node's one task gets 8 CPUs per rank (not SLURM's 1), and the whole node
    assert "#SBATCH --cpus-per-task=64" in two_nodes and "#SBATCH --exclusive" in two_nodes
    assert next(line for line in two_nodes if line.startswith("srun ")).startswith("srun --cpus-per-task=64 ")
    assert "#SBATCH --cpus-per-task=32" in (out / "fsdp-ws4" / "job.sbatch").read_text().splitlines()

    stated = head + points + "[slurm]\ncpus_per_task = 96\nexclusive = false\n"
    assert main(["collect", str(write(tmp_path, stated)), "--out", str(out), "--emit", "slurm"]) == 0
    lines = (out / "fsdp-ws16-n2" / "job.sbatch").read_text().splitlines()
    assert "#SBATCH --cpus-per-task=96" in lines and "#SBATCH --exclusive" not in lines


def test_a_bad_slurm_table_is_one_line(tmp_path: Path) -> None:
    points = '[[points]]\nstrategies = ["ddp"]\nworld_sizes = [2]\n'
    path = write(tmp_path, HEAD + "[slurm]\ncpus_per_task = 0\n" + points)
    with pytest.raises(SweepFileError) as info:
        load_sweep(path)
    assert str(info.value) == f"{path}: [slurm]: cpus_per_task must be a positive integer, got 0"
    path = write(tmp_path, HEAD + "[slurm]\ncpus = 8\n" + points)
    with pytest.raises(SweepFileError) as info:
        load_sweep(path)
    assert str(info.value) == (
        f"{path}: unknown key 'cpus' in [slurm]; allowed: cpus_per_task, exclusive, time_margin_s"
    )
    path = write(tmp_path, HEAD + "[slurm]\ntime_margin_s = 0\n" + points)
    with pytest.raises(SweepFileError) as info:
        load_sweep(path)
    assert str(info.value) == f"{path}: [slurm]: time_margin_s must be a positive integer, got 0"


def test_the_sbatch_time_limit_leaves_the_launcher_a_margin_to_write_a_failed_manifest(
    tmp_path: Path,
) -> None:
    from tracehouse.collectors.slurm import time_limit

    assert [time_limit(s) for s in (1, 60, 61, 4200, 90000)] == [
        "0-00:01:00",
        "0-00:01:00",
        "0-00:02:00",
        "0-01:10:00",
        "1-01:00:00",
    ]
    points = 'devices_per_node = 8\nstrategies = ["fsdp"]\nworld_sizes = [16]\n'
    head = HEAD.replace("global_batch = 8", "global_batch = 64")
    out = tmp_path / "o"
    assert main(["collect", str(write(tmp_path, head + points)), "--out", str(out), "--emit", "slurm"]) == 0
    lines = (out / "fsdp-ws16-n2" / "job.sbatch").read_text().splitlines()
    # the launcher's default timeout (3600 s) plus the default margin (600 s), not 01:00:00
    assert "#SBATCH --time=0-01:10:00" in lines
    srun = next(line for line in lines if line.startswith("srun "))
    assert " --timeout 3600 -- --nnodes 2 --nproc_per_node 8 " in srun
    stated = head + points + "[slurm]\ntime_margin_s = 1800\n"
    argv = [
        "collect",
        str(write(tmp_path, stated)),
        "--out",
        str(out),
        "--emit",
        "slurm",
        "--timeout",
        "7200",
    ]
    assert main(argv) == 0
    lines = (out / "fsdp-ws16-n2" / "job.sbatch").read_text().splitlines()
    assert "#SBATCH --time=0-02:30:00" in lines
    assert " --timeout 7200 -- " in next(line for line in lines if line.startswith("srun "))
