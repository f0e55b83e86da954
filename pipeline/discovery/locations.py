"""Where an input lives: a local path, or an object in a store that fsspec reaches (`s3://`, `gs://`, `az://`).

A path the user gives is a URL when it starts with `SCHEME://`; `file://` is a local path. A URL
becomes a `UPath` (universal-pathlib: the pathlib API over fsspec), so discovery lists, sniffs and
reads manifests in a store as it does in a folder. Credentials and endpoints come from each
store's own environment and configuration (for S3: `AWS_ACCESS_KEY_ID`, `AWS_PROFILE`,
`AWS_ENDPOINT_URL`, ~/.aws/...), on the driver and on every worker alike; tracehouse passes none.

The parsers read local files (they memory-map and seek), so a task reads a stored object once,
on the worker that runs it, into a scratch file (`local_copy`), and the driver never downloads
a whole file (discovery reads heads and manifests only).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
LOCAL_SCHEME = "file"
COPY_CHUNK = 8 << 20
# The fsspec filesystem package of each common store, named in the error when it is missing.
STORE_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs", "abfs": "adlfs"}


class StoreUnavailable(Exception):
    """A URL whose store cannot be reached from this process (no fsspec implementation installed)."""


def scheme_of(given: str | os.PathLike[str]) -> str | None:
    """The URL scheme of a path the user gave (`s3`), or None for a local path."""
    match = URL.match(str(given)) if isinstance(given, str) else None
    return match.group(1).lower() if match else None


def location(given: str | os.PathLike[str]) -> Path:
    """The input a user names: an absolute local path (without '..', links as given), or a store's `UPath`."""
    scheme = scheme_of(given)
    if scheme is None:
        return Path(os.path.abspath(given))
    if scheme == LOCAL_SCHEME:
        return Path(os.path.abspath(str(given)[len("file://") :]))
    try:
        from upath import UPath

        stored = UPath(str(given))
        stored.fs  # noqa: B018 -- instantiates the store's filesystem: a missing package fails here
        return stored
    except (ImportError, ValueError) as exc:
        raise StoreUnavailable(_missing_package(scheme, exc)) from None


def is_remote(path: Any) -> bool:
    """Whether a path names an object in a store rather than a local file (a `UPath` is no `Path`)."""
    return not isinstance(path, Path)


def files_under(directory: Path) -> list[Path]:
    """Every file below a folder or a store prefix, sorted (a store is listed in one pass, not per file)."""
    if not is_remote(directory):
        return [f for f in sorted(directory.rglob("*")) if f.is_file()]
    fs, root = directory.fs, directory.path
    listed = fs.find(root, detail=True)
    return sorted(
        directory.joinpath(key[len(root) :].lstrip("/"))
        for key, info in listed.items()
        if info.get("type") == "file" and key != root
    )


@contextmanager
def local_copy(path: Path) -> Iterator[Path]:
    """A local file with the bytes of `path`: the path itself, or for a stored object a scratch copy
    read in one pass into the temporary folder (deleted on exit). A missing object or a denied read
    raises the store's OSError."""
    if not is_remote(path):
        yield path
        return
    suffix = "".join(Path(path.name).suffixes)[-16:]
    fd, name = tempfile.mkstemp(prefix="tracehouse-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as out, path.open("rb") as source:
            shutil.copyfileobj(source, out, COPY_CHUNK)
        modified = path.stat().st_mtime  # a Prometheus log without timestamps is dated by it
        os.utime(name, (modified, modified))
        yield Path(name)
    finally:
        os.unlink(name)


def _missing_package(scheme: str, exc: BaseException) -> str:
    """Why a URL cannot be read here, with the install that fixes it where it is a known store."""
    package = STORE_PACKAGES.get(scheme)
    if package is not None:
        return f"reading {scheme}:// needs the {package} package (pip install {package})"
    return f"no filesystem for {scheme}:// is installed ({exc})"
