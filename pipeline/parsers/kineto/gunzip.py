"""Gunzip a whole trace file: ISA-L (`isal`, optional) when importable, else the standard library.

ISA-L inflates ~3x faster than zlib here (26 MB trace, fresh process: 27 ms vs 87 ms). The
fast path takes only the common case, one complete gzip member with nothing after it; any
other input (several members, trailing bytes, truncated or corrupt data) is decompressed
again by `gzip.decompress`, so results and errors are the standard library's.
"""

from __future__ import annotations

import gzip

try:
    from isal import isal_zlib
except ImportError:  # optional dependency: the standard library does everything
    isal_zlib = None

GZIP_WBITS = 31  # zlib: expect a gzip header and trailer (CRC-32 and size checked)


def gunzip(data: bytes) -> bytes:
    """The decompressed bytes of a gzip file (raises what `gzip.decompress` raises on bad data)."""
    if isal_zlib is not None:
        fast = _isal_single_member(data)
        if fast is not None:
            return fast
    return gzip.decompress(data)


def _isal_single_member(data: bytes) -> bytes | None:
    """The data of a file holding exactly one valid gzip member, else None."""
    inflater = isal_zlib.decompressobj(GZIP_WBITS)
    try:
        out = inflater.decompress(data)
    except isal_zlib.error:
        return None
    return out if inflater.eof and not inflater.unused_data else None
