"""How deep a JSON text nests, measured before msgspec decodes it (msgspec recurses once per level).

The C scanner counts levels as it reads; the msgspec path measures them here, the same way
(the top-level array or object is level 1), so both reject exactly the same documents.
C-speed steps per 32 MiB slice: escaped backslashes and quotes are dropped, then every byte
but quotes and brackets, then each pair of adjacent quotes (a string holding no bracket, or the
gap between two strings, which holds none either); numpy counts the brackets left outside strings.
"""

from __future__ import annotations

import mmap
import re

import numpy as np

SLICE_BYTES = 1 << 25
_KEEP = b'"[]{}'
_DELETE = bytes(b for b in range(256) if b not in _KEEP)
# Opening bracket -> +1, closing -> -1 (0xFF as int8), quote -> 0.
_STEPS = bytes.maketrans(b'[{]}"', b"\x01\x01\xff\xff\x00")
_BACKSLASH = ord("\\")
_BACKSLASHES = re.compile(rb"\\*")


def deeper_than(data: bytes | mmap.mmap, limit: int, slice_bytes: int = SLICE_BYTES) -> bool:
    """Whether some array or object of the text is nested deeper than `limit` levels.

    Exact for valid JSON; for invalid JSON a count like any other (msgspec words the error).
    """
    depth, in_string, start, n = 0, False, 0, len(data)
    while start < n:
        end = _slice_end(data, start + slice_bytes)
        brackets = _structure(data[start:end])
        start = end
        if not brackets:
            continue
        steps = np.frombuffer(brackets.translate(_STEPS), np.int8)
        if in_string or b'"' in brackets:
            inside = np.logical_xor.accumulate(steps == 0) ^ in_string
            steps = np.where(inside, 0, steps)
            in_string = bool(inside[-1])
        levels = np.cumsum(steps, dtype=np.int64)
        if depth + int(levels.max()) > limit:
            return True
        depth += int(levels[-1])
    return False


def _slice_end(data: bytes | mmap.mmap, end: int) -> int:
    """A slice end at or after `end` that splits no escape (a run of backslashes and the byte after)."""
    if end >= len(data) or data[end - 1] != _BACKSLASH:
        return min(end, len(data))
    return min(_BACKSLASHES.match(data, end - 1).end() + 1, len(data))


def _structure(text: bytes) -> bytes:
    """The quotes and brackets of a slice, escaped backslashes and quotes dropped first."""
    if b"\\" in text:  # one memchr; most traces escape nothing
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    return text.translate(None, _DELETE).replace(b'""', b"")
