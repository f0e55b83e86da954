"""Power logs a multi-node run's other nodes reported after node 0 wrote the manifest.

Each node > 0's launcher writes its power capture to `power.node<N>.json` beside the traces
(`collectors/launch.py`); node 0 lists them all in the manifest, but stops waiting after a
while: a log reported later is still found here, so its node's energy is not lost.
"""

from __future__ import annotations

import json
from pathlib import Path

from tracehouse.pipeline.common.manifest import NODE_POWER_TEMPLATE, RunManifest

REPORT_MAX_BYTES = 1 << 20  # a report lists a few file names


def late_node_logs(manifest: RunManifest, directory: Path) -> list[str]:
    """File names the other nodes' reports list that the manifest does not (plain names only)."""
    names: list[str] = []
    for node in range(1, manifest.nodes or 1):
        for name in reported_files(directory / NODE_POWER_TEMPLATE.format(node=node)):
            if name not in manifest.power.files and name not in names and stays_in(directory, name):
                names.append(name)
    return names


def stays_in(directory: Path, name: str) -> bool:
    """Whether the file resolves inside directory (a symlink may point elsewhere)."""
    try:
        return (directory / name).resolve().is_relative_to(directory.resolve())
    except (OSError, RuntimeError):
        return False


def reported_files(path: Path) -> list[str]:
    """The `files` of one node report; none when it is missing or unreadable, or a name would leave
    the folder (a name with a separator, `.` or `..`)."""
    try:
        with path.open("rb") as handle:
            report = json.loads(handle.read(REPORT_MAX_BYTES))
    except (OSError, ValueError):
        return []
    files = report.get("files") if isinstance(report, dict) else None
    if not isinstance(files, list):
        return []
    return [
        f
        for f in files
        if isinstance(f, str) and f not in ("", ".", "..") and Path(f).name == f and "\\" not in f
    ]
