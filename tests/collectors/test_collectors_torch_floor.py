"""The `collect` extra's torch floor is the version the collectors' imports need."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
# `from torch.distributed.fsdp import fully_shard` (collectors/parallel.py) first ships in torch 2.6.
NEEDED = "2.6"


def torch_floor() -> str:
    text = (REPO / "pyproject.toml").read_text()
    collect = re.search(r"^collect = \[(.*)\]$", text, re.MULTILINE)
    assert collect is not None
    for item in re.findall(r'"([^"]+)"', collect.group(1)):
        requirement = Requirement(item)
        if requirement.name == "torch":
            (spec,) = requirement.specifier
            assert spec.operator == ">="
            return spec.version
    raise AssertionError("no torch in the collect extra")


def test_collect_extra_requires_the_torch_that_has_fully_shard() -> None:
    imports = re.search(
        r"^from torch\.distributed\.fsdp import (.*)$", (REPO / "collectors/parallel.py").read_text(), re.M
    )
    assert imports is not None and "fully_shard" in imports.group(1).split(", ")
    assert torch_floor() == NEEDED


def test_the_floor_is_documented() -> None:
    assert f"Requires torch {NEEDED} or later" in (REPO / "docs/collectors.md").read_text()
