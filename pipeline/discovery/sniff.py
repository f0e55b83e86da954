"""Whether a file found by searching a folder is a Kineto trace or nccl-tests output, from its head only.

A run folder often holds other JSON files (a `config.json`, metrics): they are skipped and named
as "not a trace" rather than failing the ingest. A trace is a JSON object that has a
`traceEvents` key, or a bare array of events (objects with a `ph` key). Only the first
`SNIFF_BYTES` of the (decompressed) file are read; a file they do not decide (a huge object
with `traceEvents` further on, keys written with `\\u` escapes, an unreadable or corrupt file)
is taken as a trace and left to the parser, which names its problem if it has one.

A `.txt`, `.log` or `.out` file is nccl-tests output when its first
`nccl_tests.format.SNIFF_BYTES` show the nccl-tests run header (`# nThread N nGpus N ...`),
its version or `# Collective test starting:` line, or its column header (`size count type ...
time algbw busbw`); other text files of a run folder (training logs) are not read.
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

from tracehouse.pipeline.parsers.nccl_tests import format as nccl_format

SNIFF_BYTES = 1 << 20
# Always traces, whatever their first bytes say: the profiler's own file names.
TRACE_NAME_MARKS = (".pt.trace.json",)
_TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:')
_PHASE_KEY = re.compile(rb'"ph"\s*:')


def is_profiler_trace_name(path: Path) -> bool:
    """Whether the file carries the profiler's trace name (`*.pt.trace.json`, `.gz`)."""
    return any(mark in path.name for mark in TRACE_NAME_MARKS)


def head(path: Path, size: int = SNIFF_BYTES) -> bytes | None:
    """The first `size` bytes of a file, gunzipped if it is gzip; None when unreadable."""
    try:
        with path.open("rb") as f:
            raw = f.read(size)
            if not raw.startswith(b"\x1f\x8b"):
                return raw
            f.seek(0)
            with gzip.open(f) as z:
                return z.read(size)
    except (OSError, EOFError, zlib.error):
        return None  # unreadable or corrupt: let the parser name the problem


def looks_like_trace(path: Path) -> bool:
    """Whether a searched-for JSON file may be a Kineto trace (False only when its head says it is not)."""
    data = head(path)
    if data is None:
        return True
    text = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    undecided = len(data) == SNIFF_BYTES or b"\\u" in text  # cut short, or keys may be escaped
    if text.startswith(b"["):
        return _PHASE_KEY.search(text) is not None or undecided
    if text.startswith(b"{"):
        return _TRACE_EVENTS_KEY.search(text) is not None or undecided
    return False


def is_nccl_tests_output(path: Path) -> bool:
    """Whether a file is named and starts like nccl-tests output (False when unreadable)."""
    if not path.name.lower().endswith(nccl_format.SNIFF_SUFFIXES):
        return False
    try:
        with path.open("rb") as f:
            data = f.read(nccl_format.SNIFF_BYTES)
    except OSError:
        return False
    return nccl_format.looks_like_nccl_tests(data.decode("utf-8", errors="replace"))
