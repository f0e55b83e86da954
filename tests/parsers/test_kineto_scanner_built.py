"""The C scanner is optional for users, but a machine with a C compiler must have built it.

The extension is `optional = true` in pyproject.toml, so a compile error would only print a
warning at install time and every scanner test would skip: this test makes that visible.
"""

import shutil
import sysconfig

import pytest
from tracehouse.pipeline.parsers.kineto.fastscan import available


def test_the_scanner_is_built_where_a_compiler_is() -> None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}): the msgspec path parses alone")
    assert available(), "the _kineto_scan extension did not build (see the pip install output)"
