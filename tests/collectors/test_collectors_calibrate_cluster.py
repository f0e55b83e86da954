"""`tracehouse calibrate` over several nodes: the torchrun and sbatch it builds, and a real
two-launcher gloo sweep on this machine (two "nodes" meeting at a c10d rendezvous)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tracehouse.collectors.calibrate.cluster import SCRIPT_NAME
from tracehouse.collectors.calibrate.launch import LOG_NAME, REPORT_NAME, SPEC_NAME, torchrun_command
from tracehouse.collectors.calibrate.spec import CalibrationSpec, perf_file_name
from tracehouse.pipeline.cli.main import main

RDZV = ["--nnodes", "2", "--nproc_per_node", "8", "--rdzv-backend", "c10d", "--rdzv-endpoint", "head:29500"]


def test_a_multi_node_torchrun_takes_the_rendezvous_flags_instead_of_standalone(tmp_path: Path) -> None:
    spec = CalibrationSpec(world_size=16, backend="nccl", min_bytes=1024, max_bytes=2048, nodes=2)
    command = torchrun_command(spec, tmp_path / "s.json", tmp_path / "r.json", RDZV)
    assert command[1:3] == ["-m", "torch.distributed.run"]
    assert command[3 : 3 + len(RDZV)] == RDZV and "--standalone" not in command
    assert command[-5:] == [
        "tracehouse.collectors.calibrate.worker",
        "--spec",
        str(tmp_path / "s.json"),
        "--result",
        str(tmp_path / "r.json"),
    ]
    single = torchrun_command(
        CalibrationSpec(world_size=4, backend="gloo", min_bytes=1024, max_bytes=2048), Path("s"), Path("r")
    )
    assert single[3:8] == ["--standalone", "--nnodes", "1", "--nproc_per_node", "4"]
    assert spec.per_node == 8
    with pytest.raises(ValueError, match="world size 12 does not divide into 8 node"):
        CalibrationSpec(world_size=12, backend="nccl", min_bytes=1024, max_bytes=2048, nodes=8)


def test_calibrate_emits_an_sbatch_script_with_a_time_margin_above_its_timeout(
    tmp_path: Path, capsys
) -> None:
    out = tmp_path / "cal"
    argv = ["calibrate", "--world-size", "16", "--nodes", "2", "--out", str(out), "--emit", "slurm"]
    assert main([*argv, "--timeout", "900"]) == 0
    script = out / SCRIPT_NAME
    assert capsys.readouterr().out.strip() == str(script)
    lines = script.read_text().splitlines()
    for line in (
        "#SBATCH --nodes=2",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        "#SBATCH --time=0-00:25:00",
    ):  # 900 s + the 600 s margin
        assert line in lines, line
    srun = next(line for line in lines if line.startswith("srun "))
    assert f"-m tracehouse.collectors.calibrate.cluster --out {out.resolve()} --timeout 900 -- " in srun
    assert srun.endswith(
        '-- --nnodes 2 --nproc_per_node 8 --rdzv-backend c10d --rdzv-endpoint "$HEAD:29500" '
        '--rdzv-id "$SLURM_JOB_ID"'
    )
    spec = CalibrationSpec.read(out / SPEC_NAME)
    assert (spec.world_size, spec.nodes, spec.backend, spec.timeout_s) == (16, 2, "nccl", 900.0)

    assert main([*argv, "--time-margin", "1800"]) == 0
    assert "#SBATCH --time=0-00:40:00" in script.read_text().splitlines()  # the default 600 s + 1800 s


def test_more_than_one_node_without_emit_says_how_to_launch(tmp_path: Path, capsys) -> None:
    code = main(["calibrate", "--world-size", "4", "--nodes", "2", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "a sweep over 2 nodes runs one launcher per node: use --emit slurm" in err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_two_node_launchers_meet_at_a_rendezvous_and_node_0_writes_the_files(tmp_path: Path) -> None:
    spec = CalibrationSpec(
        world_size=2,
        backend="gloo",
        min_bytes=1024,
        max_bytes=4096,
        iters=2,
        warmup=1,
        ops=("all_reduce", "all_gather"),
        timeout_s=120,
        nodes=2,
    )
    spec.write(tmp_path / SPEC_NAME)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rdzv = [
        "--",
        "--nnodes",
        "2",
        "--nproc_per_node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        "calibrate-test",
    ]
    launchers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracehouse.collectors.calibrate.cluster",
                "--out",
                str(tmp_path),
                "--node",
                str(node),
                *rdzv,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for node in (0, 1)
    ]
    outputs = [proc.communicate(timeout=180)[0] for proc in launchers]
    assert [proc.returncode for proc in launchers] == [0, 0], outputs
    report = json.loads((tmp_path / REPORT_NAME).read_text())
    assert report["world_size"] == 2 and report["spec"]["nodes"] == 2
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert "--rdzv-backend" in report["command"] and "--standalone" not in report["command"]
    for op in ("all_reduce", "all_gather"):
        text = (tmp_path / perf_file_name(op)).read_text()
        assert "# Out of bounds values : 0 OK" in text
    assert (tmp_path / LOG_NAME).is_file() and (tmp_path / "calibrate.node1.log").is_file()
    assert not (tmp_path / "calibrate_result.json").exists()  # rank 0's hand-over, read and removed
