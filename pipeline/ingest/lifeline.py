"""A pool worker dies with the driver that started it: no worker outlives a killed ingest.

The workers are children of the pool's server (a forkserver), not of the driver. When the
driver is killed (`kill -9`, an out-of-memory kill), the server leaves at once, but a worker
busy with a file, or waiting for its next task, could go on for its whole file or forever, idle.
Two lifelines, both set when a worker starts:

* On Linux the kernel sends the worker SIGKILL when its parent (the server) exits
  (`PR_SET_PDEATHSIG`): no Python code needs to run, so it works also while the worker is inside
  the C scanner holding the GIL.
* Everywhere, a daemon thread checks every `CHECK_S` seconds that the driver's process still
  exists, and ends the worker when it does not.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

CHECK_S = 0.5
_PR_SET_PDEATHSIG = 1


def tie_to(driver_pid: int) -> None:
    """End this process when its parent exits (Linux) or when the driver's process is gone."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        _die_with_parent()
    if os.getppid() != parent or not alive(driver_pid):  # gone before the lifeline was set
        os._exit(1)
    threading.Thread(target=_watch, args=(driver_pid,), name="tracehouse-lifeline", daemon=True).start()


def alive(pid: int) -> bool:
    """Whether a process of that id exists (one of another user's counts as existing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _die_with_parent() -> None:
    """Ask the kernel for SIGKILL when the parent exits (best effort: without libc, the thread alone)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _watch(driver_pid: int) -> None:
    while alive(driver_pid):
        time.sleep(CHECK_S)
    os._exit(1)
