"""Helpers for the power tests: tiny stand-ins for dcgmi / nvidia-smi that replay real output."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Prints the replay file line by line (stdout is the sampler's pseudo-terminal, so each
# print is flushed at its newline), then either exits with the given status or waits to be stopped.
REPLAY_SCRIPT = """#!{python}
import sys, time
with open({argv_file!r}, "w") as argv:
    argv.write(" ".join(sys.argv[1:]))
for line in open({replay!r}).read().splitlines():
    print(line)
    time.sleep({pause})
exit_code = {exit_code!r}
if exit_code is not None:
    sys.exit(exit_code)
time.sleep(3600)
"""


def install_fake_tool(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    lines: list[str],
    *,
    exit_code: int | None = None,
    pause: float = 0.02,
) -> Path:
    """Put an executable `name` on PATH that replays `lines`; return the file its argv lands in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if str(bin_dir) not in os.environ.get("PATH", ""):
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    replay = tmp_path / f"{name}.replay"
    replay.write_text("\n".join(lines) + "\n")
    argv_file = tmp_path / f"{name}.argv"
    script = bin_dir / name
    script.write_text(
        REPLAY_SCRIPT.format(
            python=sys.executable,
            replay=str(replay),
            pause=pause,
            argv_file=str(argv_file),
            exit_code=exit_code,
        )
    )
    script.chmod(0o755)
    return argv_file
