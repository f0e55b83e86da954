"""The msgspec path's nesting measure (`kineto.depth`) against the depth of the decoded value."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracehouse.pipeline.parsers.kineto.depth import deeper_than

# Strings full of what the measure must see through: quotes, brackets, backslash runs.
TEXT = st.text(alphabet='ab"\\[]{}é\n', max_size=8)
VALUES = st.recursive(
    st.none() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=30,
)


def depth(value: object, level: int = 1) -> int:
    """Levels of arrays/objects (the outermost is level 1; a scalar has none)."""
    if isinstance(value, dict):
        return max([level, *(depth(v, level + 1) for v in value.values())])
    if isinstance(value, list):
        return max([level, *(depth(v, level + 1) for v in value)])
    return 0


@settings(max_examples=300, deadline=None)
@given(value=VALUES, slice_bytes=st.sampled_from([1, 2, 3, 7, 64, 1 << 25]))
def test_the_measure_is_the_depth(value: object, slice_bytes: int) -> None:
    text = json.dumps(value, ensure_ascii=False).encode()
    levels = depth(value)
    assert not deeper_than(text, levels, slice_bytes)
    assert deeper_than(text, levels - 1, slice_bytes) or levels == 0


@pytest.mark.parametrize("slice_bytes", [1, 5, 1 << 25])
def test_escapes_split_across_slices(slice_bytes: int) -> None:
    text = b'["\\\\\\"[[[[", ["\\\\"], "\\\\\\\\"]'  # brackets inside strings behind escaped quotes
    assert json.loads(text) == ['\\"[[[[', ["\\"], "\\\\"]
    assert not deeper_than(text, 2, slice_bytes)
    assert deeper_than(text, 1, slice_bytes)
