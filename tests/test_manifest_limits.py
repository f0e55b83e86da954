"""A manifest is held to the limits of common.limits: size, nesting, finite bounded numbers, unique keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tracehouse.pipeline.common.errors import ManifestError
from tracehouse.pipeline.common.limits import MANIFEST_BOUNDS, MANIFEST_MAX_BYTES, MANIFEST_MAX_DEPTH
from tracehouse.pipeline.common.manifest import RunManifest, check_facts

GOOD = '{"study": "s", "run_id": "r"'


def refused(tmp_path: Path, text: str) -> str:
    """The one-line reason RunManifest.read gives for a manifest of this text."""
    path = tmp_path / "manifest.json"
    path.write_text(text)
    with pytest.raises(ManifestError) as caught:
        RunManifest.read(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message and len(message) < len(str(path)) + 200
    return caught.value.reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (GOOD + ', "flops_per_token": 1e400}', "number '1e400' is beyond double range"),
        (GOOD + ', "model_config": {"eps": -1e999}}', "number '-1e999' is beyond double range"),
        (GOOD + ', "flops_per_token": NaN}', "NaN is not a JSON number"),
        (GOOD + ', "peak_flops": Infinity}', "Infinity is not a JSON number"),
        (GOOD + ', "model_config": {"x": ' + "9" * 30 + "}}", "integer '99999.* is beyond int64"),
        (
            GOOD + ', "peak_flops": 1e308, "tokens_per_step": 4611686018427387904}',
            "(peak_flops|tokens_per_step) must be below",
        ),
        (GOOD + ', "peak_flops": 1e308}', r"peak_flops must be below 1e\+18, got 1e\+308"),
        (GOOD + ', "tokens_per_step": 4611686018427387904}', "tokens_per_step must be below 1099511627776"),
        (GOOD + ', "flops_per_token": 1e16}', "flops_per_token must be below 1e\\+15, got 1e\\+16"),
        (GOOD + ', "n_params": 1125899906842624}', "n_params must be below 1125899906842624"),
        (GOOD + ', "global_batch": 4294967295, "seq_len": 4294967295}', r"tokens_per_step \(global_batch"),
        (GOOD + ', "fsdp_units": {"": 1125899906842624}}', r"fsdp_units\[''\] must be below"),
        (GOOD + ', "fsdp_units": {"": -1}}', r"fsdp_units\[''\] must be positive"),
        (GOOD + ', "power": {"interval_ms": 2147483648}}', "power.interval_ms must be below 2147483648"),
        (GOOD + ', "peak_flops": -1.5}', "peak_flops must be positive, got -1.5"),
        (GOOD + ', "traces": {"0": "a.json", "0": "b.json"}}', "key '0' appears twice in one object"),
        (GOOD + ', "run_id": "again"}', "key 'run_id' appears twice"),
        (GOOD + ', "model": "\\ud800"}', "is not valid Unicode"),
        (GOOD + ', "model_config": {"\\udc00": 1}}', "is not valid Unicode"),
        (GOOD + ', "power": {"files": ["p\\u0000.csv"]}}', "holds a NUL character"),
        (GOOD + ', "colour' + "x" * 5000 + '": 1}', "unknown field colourxxx"),
    ],
)
def test_out_of_range_numbers_and_duplicate_keys_are_one_line(tmp_path: Path, text: str, reason: str) -> None:
    assert re.search(reason, refused(tmp_path, text))


def test_a_manifest_nested_10_to_the_5_deep_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    reason = refused(tmp_path, GOOD + f', "model_config": {{"x": {deep}}}}}')
    assert reason == f"manifest nests arrays/objects deeper than {MANIFEST_MAX_DEPTH} levels"


def test_nesting_is_allowed_up_to_the_limit_and_refused_beyond(tmp_path: Path) -> None:
    def nested(levels: int) -> str:  # the top-level object and model_config are 2 levels
        inner = "[" * (levels - 2) + "]" * (levels - 2)
        return GOOD + f', "model_config": {{"x": {inner or 0}}}}}'

    path = tmp_path / "manifest.json"
    path.write_text(nested(MANIFEST_MAX_DEPTH))
    assert RunManifest.read(path).run_id == "r"
    assert "deeper than" in refused(tmp_path, nested(MANIFEST_MAX_DEPTH + 1))


def test_a_manifest_over_1_mib_is_refused_before_parsing(tmp_path: Path) -> None:
    padding = " " * (2 << 20)  # valid JSON: only its size is wrong
    assert refused(tmp_path, GOOD + padding + "}") == f"manifest is larger than {MANIFEST_MAX_BYTES} bytes"
    path = tmp_path / "manifest.json"
    path.write_text(GOOD + " " * (MANIFEST_MAX_BYTES - len(GOOD) - 1) + "}")
    assert RunManifest.read(path).study == "s"


def test_bounds_allow_the_largest_real_runs(tmp_path: Path) -> None:
    data = {
        "study": "s",
        "run_id": "r",
        "n_params": 2 * 10**12,
        "flops_per_token": 6 * 2e12,
        "tokens_per_step": 64 * 10**6,
        "peak_flops": 4.5e15,  # fp8 dense, a B200 class device
        "world_size": 100_000,
    }
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(data))
    manifest = RunManifest.read(path)
    products = (
        manifest.tokens_per_step * manifest.flops_per_token,
        manifest.peak_flops * manifest.world_size,
        MANIFEST_BOUNDS["tokens_per_step"] * MANIFEST_BOUNDS["flops_per_token"],
        MANIFEST_BOUNDS["peak_flops"] * 2**31,
    )
    assert all(p < 1e30 for p in products)  # what the views multiply stays far inside float64


def test_facts_from_the_command_line_are_bounded_too() -> None:
    with pytest.raises(ValueError, match="flops_per_token must be below"):
        check_facts({"flops_per_token": float("inf")})
    with pytest.raises(ValueError, match="tokens_per_step must be below"):
        check_facts({"tokens_per_step": 2**62})
