"""Run a monitoring command (dcgmi, nvidia-smi) and stamp each line with the host clock as it is read.

The child writes into a pseudo-terminal, not a pipe: C/C++ programs block-buffer a pipe, so
lines would arrive seconds late in bursts and their stamps would be wrong.
"""

from __future__ import annotations

import os
import pty
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tracehouse.collectors.power.errors import PowerSourceError

STOP_GRACE_S = 5.0


class StampedProcessSampler:
    """Writes `<unix_ns>\\t<line>` for every line the command prints; starts nothing until `start`."""

    source = "process"
    install_hint = ""

    def __init__(
        self,
        *,
        command: list[str],
        path: Path,
        header: str,
        is_sample: Callable[[str], bool],
        probe_timeout_s: float,
    ) -> None:
        self.command = command
        self.path = Path(path)
        self.header = header
        self.is_sample = is_sample
        self.probe_timeout_s = probe_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._file: IO[str] | None = None
        self._reader: threading.Thread | None = None
        self._first_sample = threading.Event()
        self._last_line = ""
        self.error: PowerSourceError | None = None  # set when the command exited before stop()

    def start(self) -> list[str]:
        """Start the command, wait for its first sample, return the log's name."""
        executable = shutil.which(self.command[0])
        if executable is None:
            raise PowerSourceError(f"{self.command[0]} is not on PATH{self.install_hint}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w")
        self._file.write(self.header)
        master, slave = pty.openpty()
        try:
            self._process = subprocess.Popen(
                [executable, *self.command[1:]],
                stdin=subprocess.DEVNULL,
                stdout=slave,
                stderr=slave,
                start_new_session=True,  # its own process group: stop() signals it alone
            )
        finally:
            os.close(slave)
        self._reader = threading.Thread(target=self._read, args=(master,), name=f"tracehouse-{self.source}")
        self._reader.daemon = True
        self._reader.start()
        self._wait_first_sample()
        return [self.path.name]

    def stop(self) -> None:
        """Stop the command, finish reading what it printed, close the log."""
        if self._first_sample.is_set() and self._process is not None and self._process.poll() is not None:
            said = f"; it said: {self._last_line}" if self._last_line else ""
            self.error = PowerSourceError(
                f"`{' '.join(self.command)}` exited with status {self._process.returncode} mid-run{said}"
            )
        self._terminate()
        if self._reader is not None:
            self._reader.join()
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> StampedProcessSampler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _wait_first_sample(self) -> None:
        deadline = time.monotonic() + self.probe_timeout_s
        assert self._process is not None
        while not self._first_sample.wait(0.05):
            exited = self._process.poll() is not None and not self._reader_alive()
            if exited or time.monotonic() > deadline:
                self.stop()
                self.path.unlink(missing_ok=True)
                what = (
                    f"exited with status {self._process.returncode}"
                    if exited
                    else (f"printed no sample within {self.probe_timeout_s:g} s")
                )
                said = f"; it said: {self._last_line}" if self._last_line else ""
                raise PowerSourceError(f"`{' '.join(self.command)}` {what}{said}")

    def _reader_alive(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def _read(self, master: int) -> None:
        pending = b""
        try:
            while chunk := read_chunk(master):
                stamp = time.time_ns()
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                self._write(stamp, lines)
            if pending:
                self._write(time.time_ns(), [pending])
        finally:
            os.close(master)

    def _write(self, stamp: int, lines: list[bytes]) -> None:
        assert self._file is not None
        for raw in lines:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line.strip():
                continue
            self._file.write(f"{stamp}\t{line}\n")
            self._last_line = line.strip()
            if self.is_sample(line):
                self._first_sample.set()
        self._file.flush()

    def _terminate(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def read_chunk(fd: int) -> bytes:
    """Bytes from the pseudo-terminal; b"" at end (Linux raises EIO once the child has closed it)."""
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""
