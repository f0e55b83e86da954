"""Builds of the C scanner for the fuzz and CI checks, outside the installed package.

* sanitized: `-fsanitize=address,undefined`, every report fatal (the worker aborts: a finding);
  Python is not instrumented, so the worker preloads libasan (`sanitizer_env`).
* portable: `__SSE2__` undefined, so scan16.h takes its SWAR path (the one non-x86 machines run).
The worker loads the built module in place of the installed one (oracle.SCANNER_SO_VARIABLE).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sysconfig
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "pipeline/parsers/kineto/scanner/_kineto_scan.c"
FLAGS = {
    "sanitized": [
        "-O1",
        "-g",
        "-fno-omit-frame-pointer",
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
    ],
    "portable": ["-O2", "-U__SSE2__"],
}


def compiler() -> str:
    return (sysconfig.get_config_var("CC") or "cc").split()[0]


def build_scanner(kind: str, out_dir: Path) -> Path:
    """Compile the scanner as `kind` into out_dir; the shared object's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"_kineto_scan{sysconfig.get_config_var('EXT_SUFFIX')}"
    include = sysconfig.get_paths()["include"]
    command = [
        compiler(),
        "-shared",
        "-fPIC",
        "-Wall",
        *FLAGS[kind],
        f"-I{include}",
        str(SOURCE),
        "-o",
        str(target),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"building the {kind} scanner failed: {shlex.join(command)}\n{done.stderr}")
    if done.stderr.strip():
        print(done.stderr.strip())
    return target


def sanitizer_env() -> dict[str, str]:
    """What a Python process needs to load the sanitized scanner: libasan first, reports fatal."""
    libasan = subprocess.run(
        [compiler(), "-print-file-name=libasan.so"], capture_output=True, text=True
    ).stdout
    return {
        "LD_PRELOAD": " ".join(filter(None, [libasan.strip(), os.environ.get("LD_PRELOAD", "")])),
        "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=99",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=98",
        "PYTHONMALLOC": "malloc",  # Python's allocations through ASan's malloc too
    }
