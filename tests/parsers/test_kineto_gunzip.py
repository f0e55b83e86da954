"""kineto_gunzip: the ISA-L fast path and the standard-library fallback agree on every input shape."""

from __future__ import annotations

import gzip
import zlib

import pytest
from tracehouse.pipeline.parsers.kineto import gunzip as kineto_gunzip
from tracehouse.pipeline.parsers.kineto.gunzip import gunzip

TEXT = b'{"traceEvents": [' + b'{"ph": "X", "ts": 1, "dur": 2},' * 2000 + b"{}]}"


def test_single_member_round_trip() -> None:
    assert gunzip(gzip.compress(TEXT)) == TEXT


def test_several_members_are_concatenated() -> None:
    # `cat a.gz b.gz` is a valid gzip file: the fast path must not stop after the first member.
    assert gunzip(gzip.compress(TEXT[:100]) + gzip.compress(TEXT[100:])) == TEXT


def test_trailing_zero_padding_is_ignored_as_gzip_does() -> None:
    assert gunzip(gzip.compress(TEXT) + b"\0" * 8) == TEXT


@pytest.mark.parametrize(
    "mangle",
    [
        lambda z: z[:-3],  # truncated
        lambda z: z[:-8] + b"\0\0\0\0" + z[-4:],  # wrong CRC-32
        lambda z: z + b"garbage",  # trailing bytes that are not a member
    ],
    ids=["truncated", "bad-crc", "trailing-garbage"],
)
def test_bad_data_raises_what_gzip_raises(mangle) -> None:
    data = mangle(gzip.compress(TEXT))
    with pytest.raises((OSError, EOFError, zlib.error)) as ours:
        gunzip(data)
    with pytest.raises((OSError, EOFError, zlib.error)) as stdlib:
        gzip.decompress(data)
    assert type(ours.value) is type(stdlib.value)


def test_isal_is_used_when_installed() -> None:
    # The fast path must actually run where isal is installed (else the speed-up silently vanishes).
    pytest.importorskip("isal")
    assert kineto_gunzip._isal_single_member(gzip.compress(TEXT)) == TEXT
