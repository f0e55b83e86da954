"""Through the CLI: a manifest names files inside its folder only, one bad manifest fails its own run
only, and rows a parser drops reach the summary and ingest_errors as warnings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.wh_helpers import count, write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.power_log import NVML_HEADER, format_log_header

NVML_HEAD = format_log_header(source="nvml", host="n1", interval_ms=100, clock="host-realtime")
GOOD_ROW = "1700000000000000000,0,250000,1000,50,90,1024\n"


def ingest_json(capsys, *args: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["ingest", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def rows(capsys, warehouse: Path, sql: str) -> list[dict]:
    capsys.readouterr()
    assert main(["query", sql, "--warehouse", str(warehouse), "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def run_folder(folder: Path, manifest: dict | str) -> Path:
    """A run of one trace (rank 0 of 1) with the given manifest (a dict, or raw text)."""
    write_trace(folder / "rank0.json", rank=0, world_size=1)
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    (folder / "manifest.json").write_text(text)
    return folder


def escaping(tmp_path: Path, entry: str) -> Path:
    """A run whose manifest lists `entry` as a power log; a real NVML log lies outside the folder."""
    (tmp_path / "outside.csv").write_text(NVML_HEAD + NVML_HEADER + "\n" + GOOD_ROW)
    return run_folder(tmp_path / "run", {"study": "s", "run_id": "r", "power": {"files": [entry]}})


@pytest.mark.parametrize("entry", ["ABSOLUTE", "../outside.csv", "sub/../../outside.csv", "link.csv"])
def test_a_power_log_outside_the_manifest_folder_fails_the_run(tmp_path, capsys, entry):
    if entry == "ABSOLUTE":
        entry = str(tmp_path / "outside.csv")
    run = escaping(tmp_path, entry)
    (run / "link.csv").symlink_to(tmp_path / "outside.csv")
    wh = tmp_path / "wh"
    code, summary = ingest_json(capsys, str(run), "--warehouse", str(wh))
    assert code == 1 and summary["loaded"] == 0 and summary["power_files"] == 0
    reasons = {f["path"]: f["reason"] for f in summary["failed"]}
    manifest = str(run / "manifest.json")
    assert f"power.files[0] {entry!r} resolves outside the manifest's folder" in reasons[manifest]
    assert reasons[str(run / "rank0.json")].startswith("its run's manifest.json is invalid: power.files[0]")
    assert all("\n" not in r for r in reasons.values())
    assert count(wh, "power_samples_raw") == 0 and count(wh, "traces") == 0


def test_a_trace_symlink_out_of_the_folder_fails_the_run(tmp_path, capsys):
    elsewhere = write_trace(tmp_path / "elsewhere" / "secret.json", rank=0, world_size=1)
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.json").symlink_to(elsewhere)
    (run / "manifest.json").write_text(
        json.dumps({"study": "s", "run_id": "r", "traces": {"0": "rank0.json"}})
    )
    code, summary = ingest_json(capsys, str(run), "--warehouse", str(tmp_path / "wh"))
    reasons = {f["path"]: f["reason"] for f in summary["failed"]}
    assert code == 1 and summary["loaded"] == 0
    assert (
        "traces['0'] 'rank0.json' resolves outside the manifest's folder"
        in reasons[str(run / "manifest.json")]
    )


def test_a_symlink_inside_the_folder_is_fine(tmp_path, capsys):
    run = run_folder(tmp_path / "run", {"study": "s", "run_id": "r", "power": {"files": ["p.csv"]}})
    (run / "logs").mkdir()
    (run / "logs" / "real.csv").write_text(NVML_HEAD + NVML_HEADER + "\n" + GOOD_ROW)
    (run / "p.csv").symlink_to(run / "logs" / "real.csv")
    code, summary = ingest_json(capsys, str(run), "--warehouse", str(tmp_path / "wh"))
    assert code == 0 and (summary["loaded"], summary["power_files"]) == (1, 1)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"study": "s", "run_id": "bad", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "deeper than 16"),
        ('{"study": "s", "run_id": "bad"' + " " * (2 << 20) + "}", "larger than 1048576 bytes"),
        ('{"study": "s", "run_id": "bad", "flops_per_token": 1e400}', "beyond double range"),
        (
            '{"study": "s", "run_id": "bad", "peak_flops": 1e308, "tokens_per_step": 4611686018427387904}',
            "below",
        ),
        ('{"study": "s", "run_id": "bad", "traces": {"0": "rank0.json", "0": "x.json"}}', "appears twice"),
    ],
)
def test_one_bad_manifest_fails_its_own_run_and_nothing_else(tmp_path, capsys, text, reason):
    good = run_folder(tmp_path / "good", {"study": "s", "run_id": "good"})
    bad = run_folder(tmp_path / "bad", text)
    wh = tmp_path / "wh"
    code, summary = ingest_json(capsys, str(good), str(bad), "--warehouse", str(wh))
    reasons = {f["path"]: f["reason"] for f in summary["failed"]}
    assert code == 1 and summary["loaded"] == 1
    assert set(reasons) == {str(bad / "manifest.json"), str(bad / "rank0.json")}
    assert reason in reasons[str(bad / "manifest.json")] and not any(f["internal"] for f in summary["failed"])
    assert all("\n" not in r and len(r) < 300 for r in reasons.values())
    assert count(wh, "traces WHERE run_id = 'good'") == 1
    assert rows(capsys, wh, "SELECT count(*) AS n FROM runs") == [{"n": 1}]  # the study's views answer


def test_dropped_power_samples_are_a_warning_in_the_summary_and_ingest_errors(tmp_path, capsys):
    log = NVML_HEAD + NVML_HEADER + "\n" + GOOD_ROW * 2  # the same sample twice
    log += "1700000000100000000,0,-5000,1000,50,90,1024\n"  # negative power
    log += "-1700000000000000000,0,250000,1000,50,90,1024\n"  # before 1970
    log += "1700000000200000000,0,250000,1000,50,90,1024\n"
    run = run_folder(tmp_path / "run", {"study": "s", "run_id": "r", "power": {"files": ["p.csv"]}})
    (run / "p.csv").write_text(log)
    wh = tmp_path / "wh"
    code, summary = ingest_json(capsys, str(run), "--warehouse", str(wh))
    assert code == 0 and summary["power_files"] == 1
    warnings = [w for w in summary["warnings"] if w.startswith(str(run / "p.csv"))]
    assert warnings == [
        f"{run / 'p.csv'}: 2 of 5 samples dropped: ts_unix_ns outside [0, 9.22337e+18] (1), "
        "power_w outside [0, 5000] (1); its other samples are loaded",
        f"{run / 'p.csv'}: 1 repeated samples dropped (same device, time and values); "
        "its other samples are loaded",
    ]
    assert count(wh, "power_samples_raw") == 2
    recorded = rows(capsys, wh, "SELECT path, reason, severity FROM ingest_errors ORDER BY reason")
    assert [(r["path"], r["severity"]) for r in recorded] == [(str(run / "p.csv"), "warning")] * 2
    assert [r["reason"] for r in recorded] == sorted(warnings)
    # ingesting it again skips the file and keeps its warnings
    assert ingest_json(capsys, str(run), "--warehouse", str(wh))[0] == 0
    assert len(rows(capsys, wh, "SELECT * FROM ingest_errors WHERE severity = 'warning'")) == 2
    # its partition damaged, ingesting it again repairs it and records its warnings once, not twice
    next((wh / "parquet" / "power_samples").rglob("*[0-9a-f].parquet")).unlink()
    code, again = ingest_json(capsys, str(run), "--warehouse", str(wh))
    assert code == 0 and again["repaired"] == [str(run / "p.csv")]
    assert len(rows(capsys, wh, "SELECT * FROM ingest_errors WHERE severity = 'warning'")) == 2


def test_dropped_nccl_tests_rows_are_a_warning_not_an_internal_error(tmp_path, capsys, shared_data):
    lines = (shared_data / "nccl-tests" / "superbench-a100-8gpu-allreduce-v2old.txt").read_text().split("\n")
    lines[30] = lines[30].replace("36.18", "nan")  # line 31
    lines[31] = re.sub(r"^( *)\d+", r"\g<1>" + "1" + "0" * 26, lines[31])  # line 32: 10^26 bytes
    folder = tmp_path / "net"
    folder.mkdir()
    (folder / "all_reduce_perf.txt").write_text("\n".join(lines))
    wh = tmp_path / "wh"
    code, summary = ingest_json(capsys, str(folder), "--warehouse", str(wh))
    path = folder / "all_reduce_perf.txt"
    assert code == 0 and summary["nccl_tests_files"] == 1 and summary["failed"] == []
    line = (
        f"{path}: 2 result rows dropped: time_us outside [0, 9.0072e+15] (1), "
        "bytes outside [0, 2.81475e+14] (1); its other results are loaded"
    )
    assert line in summary["warnings"]
    assert rows(capsys, wh, "SELECT reason, severity, internal FROM ingest_errors") == [
        {"reason": line, "severity": "warning", "internal": False}
    ]
    assert rows(capsys, wh, "SELECT count(*) AS n FROM network_curve_points") == [{"n": 2 * 32}]


def test_forgetting_a_run_forgets_its_files_warnings(tmp_path, capsys):
    log = NVML_HEAD + NVML_HEADER + "\n" + GOOD_ROW * 2
    run = run_folder(tmp_path / "run", {"study": "s", "run_id": "r", "power": {"files": ["p.csv"]}})
    (run / "p.csv").write_text(log)
    wh = tmp_path / "wh"
    assert ingest_json(capsys, str(run), "--warehouse", str(wh))[0] == 0
    assert len(rows(capsys, wh, "SELECT * FROM ingest_errors WHERE severity = 'warning'")) == 1
    assert main(["forget", "r", "--warehouse", str(wh)]) == 0
    assert rows(capsys, wh, "SELECT count(*) AS n FROM ingest_errors") == [{"n": 0}]
