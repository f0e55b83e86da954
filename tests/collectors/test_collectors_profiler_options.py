"""What the profiler records (issue 27 item 6): shapes and nn.Module events always, `[memory]`
events only with `--profile-memory`; real one-rank collects of tiny (CPU)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from tracehouse.collectors.spec import trace_name
from tracehouse.pipeline.cli.main import main

pytestmark = pytest.mark.slow

POINT = ["--model", "tiny", "--strategy", "ddp", "--world-size", "1", "--steps", "3", "--active", "1"]


def collected_events(out: Path, *flags: str) -> list[dict]:
    assert main(["collect", *POINT, "--out", str(out), *flags]) == 0
    with gzip.open(out / "ddp-ws1" / trace_name(0)) as handle:
        return json.load(handle)["traceEvents"]


def memory_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("name") == "[memory]" and e.get("ph") == "i"]


def test_profile_memory_flag_adds_memory_events_and_modules_are_always_there(tmp_path: Path) -> None:
    with_memory = collected_events(tmp_path / "memory", "--profile-memory")
    allocations = memory_events(with_memory)
    assert allocations and all("Bytes" in e["args"] and "Total Allocated" in e["args"] for e in allocations)
    plain = collected_events(tmp_path / "plain")
    assert memory_events(plain) == []
    for events in (with_memory, plain):
        modules = {e["name"] for e in events if e.get("cat") == "python_function"}
        # The model's own layers, by class: Llama_0 holds TransformerBlock_0, Attention_0, ...
        assert {"nn.Module: Llama_0", "nn.Module: Attention_0", "nn.Module: FeedForward_0"} <= modules
        assert any(e.get("cat") == "cpu_op" and e["args"].get("Input Dims") for e in events)
