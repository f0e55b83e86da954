"""A bad or unreachable `--scheduler` is one line and a non-zero exit; no warehouse is written."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
import tracehouse.pipeline.ingest.driver as ingest_module
from support.wh_helpers import write_trace
from tracehouse.pipeline.cli.main import main


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "address",
    ["notanaddress", "127.0.0.1:8786", "tcp://node1", "tcp://node1:", "tcp://node1:99999", "tcp://a b:1", ""],
)
def test_a_malformed_address_is_one_line_before_anything_is_written(tmp_path, capsys, address):
    write_trace(tmp_path / "run" / "r0.json", rank=0)
    wh = tmp_path / "wh"
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(wh), "--scheduler", address]) == 2
    assert capsys.readouterr().err == (
        f"tracehouse ingest: error: scheduler address {address!r}: expected tcp://HOST:PORT, e.g. tcp://node1:8786\n"
    )
    assert not wh.exists()


def test_an_unreachable_scheduler_is_one_line_within_the_timeout(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ingest_module, "SCHEDULER_TIMEOUT_S", 2)
    write_trace(tmp_path / "run" / "r0.json", rank=0)
    wh = tmp_path / "wh"
    address = f"tcp://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    assert main(["ingest", str(tmp_path / "run"), "--warehouse", str(wh), "--scheduler", address]) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.startswith(f"tracehouse ingest: error: cannot reach the Dask scheduler at {address}: ")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not wh.exists()


def test_the_default_timeout_is_short():
    assert ingest_module.SCHEDULER_TIMEOUT_S <= 10


def test_the_real_command_says_one_line(tmp_path):
    write_trace(tmp_path / "run" / "r0.json", rank=0)
    wh = tmp_path / "wh"
    command = [sys.executable, "-m", "tracehouse.pipeline.cli", "ingest", str(tmp_path / "run")]
    done = subprocess.run(
        [*command, "--warehouse", str(wh), "--scheduler", "notanaddress"], capture_output=True, text=True
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "tracehouse ingest: error: scheduler address 'notanaddress': expected tcp://HOST:PORT, e.g. tcp://node1:8786\n"
    )
    assert not wh.exists()
