"""Multi-node energy (issue 30 item 5): two nodes' launchers (real processes, each in its own UTS
namespace so each has its own host name, as two cluster nodes do) run one 2-node torchrun into
one run folder, each with a power sampler (a stand-in `nvidia-smi` printing live samples: 100 W
on node0, 200 W on node1); the manifest lists both nodes' logs and ingest counts both.

Also: a sampler that stops mid-run is recorded in the manifest and warned of at ingest."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tracehouse.collectors.spec import ProfilingConfig, RunSpec
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.manifest import MANIFEST_NAME, RunManifest
from tracehouse.pipeline.warehouse.database import connect

pytestmark = pytest.mark.slow

# Live samples every 50 ms, local time as nvidia-smi prints it; power from the host name.
FAKE_SMI = """#!{python}
import socket, sys, time
from datetime import datetime
watts = {{"node0": 100, "node1": 200}}.get(socket.gethostname(), 1)
print("timestamp, index, uuid, pci.bus_id, power.draw [W], temperature.gpu, utilization.gpu [%], "
      "memory.used [MiB]", flush=True)
for _ in range({rows}):
    stamp = datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
    print(f"{{stamp}}, 0, GPU-0a0c55a1, 00000000:18:00.0, {{watts}}.00 W, 40, 90 %, 1000 MiB", flush=True)
    time.sleep(0.05)
sys.exit({exit_code})
"""


def can_rename_host() -> bool:
    probe = ["unshare", "-u", "sh", "-c", "hostname node-probe"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def fake_smi(tmp_path: Path, *, rows: int = 100_000, exit_code: int = 0) -> dict[str, str]:
    """An environment whose PATH finds the stand-in nvidia-smi first."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(FAKE_SMI.format(python=sys.executable, rows=rows, exit_code=exit_code))
    tool.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_command(run_dir: Path, node: int, port: int) -> list[str]:
    launch = [
        sys.executable, "-m", "tracehouse.collectors.launch", "--run-dir", str(run_dir), "--timeout", "300",
        "--", "--nnodes", "2", "--nproc_per_node", "1", "--node-rank", str(node),
        "--master-addr", "127.0.0.1", "--master-port", str(port),
    ]  # fmt: skip
    script = f'hostname node{node} && exec "$@"'
    return ["unshare", "-u", "sh", "-c", script, "sh", *launch]


@pytest.mark.skipif(not can_rename_host(), reason="needs `unshare -u` (root) to give each node a host name")
def test_every_nodes_power_log_reaches_the_manifest_and_the_energy(tmp_path: Path) -> None:
    spec = RunSpec(
        study="multinode", model="tiny", strategy="ddp", world_size=2, nodes=2, steps=3,
        global_batch=4, seq_len=16, profile=ProfilingConfig(active=1),
    )  # fmt: skip
    run_dir = tmp_path / "out" / spec.run_id
    run_dir.mkdir(parents=True)
    spec.write(run_dir)
    env, port = fake_smi(tmp_path), free_port()
    nodes = [
        subprocess.Popen(node_command(run_dir, node, port), env={**env, "SLURM_NODEID": str(node)})
        for node in (0, 1)
    ]
    assert [proc.wait(timeout=600) for proc in nodes] == [0, 0]
    manifest = RunManifest.read(run_dir / MANIFEST_NAME)
    assert manifest.status == "ok", manifest.failure
    assert manifest.hosts == ["node0", "node1"]
    assert sorted(manifest.power.files) == ["power-node0-nvidia-smi.csv", "power-node1-nvidia-smi.csv"]
    assert (manifest.power.source, manifest.power.failure) == ("nvidia-smi", None)

    wh = tmp_path / "wh"
    assert main(["ingest", str(tmp_path / "out"), "--warehouse", str(wh)]) == 0
    with connect(wh, read_only=True) as con:
        rows = con.execute(
            "SELECT host, count(*), sum(energy_j) FROM step_energy GROUP BY host ORDER BY host"
        ).fetchall()
    assert [(host, steps) for host, steps, _ in rows] == [("node0", 1), ("node1", 1)]
    # Same step window, constant power: node1's energy is exactly twice node0's.
    assert rows[1][2] == pytest.approx(2 * rows[0][2], rel=1e-9)
    assert rows[0][2] > 0


def test_a_sampler_that_stops_mid_run_is_in_the_manifest_and_warned_of(tmp_path: Path, capsys) -> None:
    env = fake_smi(tmp_path, rows=3, exit_code=3)  # three samples, then it dies with status 3
    out = tmp_path / "out"
    point = ["--model", "tiny", "--strategy", "ddp", "--world-size", "1", "--steps", "3", "--active", "1"]
    result = subprocess.run(
        [sys.executable, "-m", "tracehouse.pipeline.cli.main", "collect", *point, "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    power = RunManifest.read(out / "ddp-ws1" / MANIFEST_NAME).power
    assert power.source == "nvidia-smi"
    assert power.failure is not None
    assert power.failure.startswith("nvidia-smi sampling stopped early: `nvidia-smi --query-gpu=")
    assert "exited with status 3 mid-run" in power.failure
    capsys.readouterr()
    assert main(["ingest", str(out), "--warehouse", str(tmp_path / "wh")]) == 0
    warned = capsys.readouterr()
    assert "power capture of tiny/ddp-ws1 is incomplete: nvidia-smi sampling stopped early" in (
        warned.out + warned.err
    )
