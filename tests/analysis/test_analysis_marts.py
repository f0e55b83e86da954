"""scale_points, collectives, power, stragglers and clocks on a hand-made study, by hand."""

from __future__ import annotations

import pytest
from support.analysis_marts_fixture import study_db
from support.analysis_rawdb import rows


@pytest.fixture(scope="module")
def con():
    return study_db()


def test_scale_points_by_hand(con):
    got = {r["run_id"]: r for r in rows(con, "SELECT * FROM scale_points WHERE study = 's'")}
    r2, r1 = got["r2"], got["r1"]
    # r2 windows: rank 0 [10,110) 100 and [110,150) 40; rank 1 [10,110) 100 and [110,140) 30
    # slowest per step: 100, 40 -> median 70 µs; 700 tokens / 70 µs = 1e7 tokens/s
    assert r2["step_time_us"] == 70.0 and r2["tokens_per_s"] == pytest.approx(1e7)
    assert r2["tokens_per_s_per_device"] == pytest.approx(5e6)
    assert r2["mfu"] == pytest.approx(5e6 * 1e6 / 1e12)
    # r1: step 1 = [10, 150) (its only placed step... step 2 has no GPU work): 140 µs -> 5e6 tokens/s
    assert r1["step_time_us"] == 140.0 and r1["tokens_per_s"] == pytest.approx(5e6)
    # strong scaling vs world size 1: (1e7 / 5e6) / (2 / 1) = 1; marginal (1e7 - 5e6) / 1
    assert r2["scaling_efficiency"] == pytest.approx(1.0) and r1["scaling_efficiency"] == pytest.approx(1.0)
    assert r2["marginal_tokens_per_s_per_device"] == pytest.approx(5e6)
    assert r1["marginal_tokens_per_s_per_device"] is None
    # compute 50 + 40 + 80 + 30 = 200 of 270 µs of windows
    assert r2["compute_frac"] == pytest.approx(200 / 270) and r2["idle_frac"] == pytest.approx(70 / 270)


def test_energy_from_counter_and_trapezoid(con):
    got = rows(con, "SELECT run_id, step, energy_j, energy_method FROM step_energy ORDER BY run_id, step")
    # r1 (nvidia-smi, no counter): window [10,150) µs, power 50 + 100 t/500 W -> 52 W to 80 W
    #   trapezoid (52 + 80) / 2 * 140e-6 = 9.24e-3 J
    # r2 (nvml counter 0.02 J over 200 µs): step 1 [10,110) -> 0.01 J, step 2 [110,150) -> 0.004 J
    assert [(r["run_id"], r["step"], r["energy_method"]) for r in got] == [
        ("r1", 1, "trapezoid"),
        ("r2", 1, "counter"),
        ("r2", 2, "counter"),
    ]
    assert [r["energy_j"] for r in got] == pytest.approx([9.24e-3, 0.01, 0.004])
    sp = rows(con, "SELECT * FROM scale_points WHERE run_id = 'r2'")[0]
    # mean over steps 0.007 J; 100 W average; 700 tokens / 0.007 J
    assert sp["energy_per_step_j"] == pytest.approx(0.007)
    assert sp["avg_power_w_per_device"] == pytest.approx(100.0)
    assert sp["tokens_per_j"] == pytest.approx(1e5) and sp["energy_method"] == "counter"


def test_collective_instances_by_hand(con):
    got = rows(con, "SELECT * FROM collective_instances WHERE process_group = '0' ORDER BY rank")
    # transfer = min(50, 30) = 30 µs; waits 20 and 0; skew 125 - 100 = 25 µs
    # algbw = 1e6 B / 30e-6 s = 33.3 GB/s; all_reduce n=2: busbw = algbw * 2 * 1 / 2
    assert [r["wait_us"] for r in got] == [20.0, 0.0]
    assert {r["transfer_us"] for r in got} == {30.0} and {r["skew_us"] for r in got} == {25.0}
    assert got[0]["algbw_gbps"] == pytest.approx(1e6 / 30e-6 / 1e9)
    assert got[0]["busbw_gbps"] == pytest.approx(got[0]["algbw_gbps"])
    assert {r["matched_by"] for r in got} == {"seq"} and not got[0]["group_counts_differ"]


def test_group_with_differing_counts_is_flagged_not_guessed(con):
    got = rows(
        con,
        "SELECT rank, matched_by, group_counts_differ, transfer_us FROM collective_instances "
        "WHERE process_group = '1' ORDER BY rank, start_unix_ns",
    )
    assert got == [
        {"rank": 0, "matched_by": "order", "group_counts_differ": True, "transfer_us": None}
    ] * 2 + [{"rank": 1, "matched_by": "order", "group_counts_differ": True, "transfer_us": None}]


def test_stragglers_skew_and_clock_offsets(con):
    strag = rows(
        con,
        "SELECT step, slowest_rank, slowest_us, median_us, lead_us FROM step_stragglers "
        "WHERE run_id = 'r2' ORDER BY step",
    )
    # step 2: rank 0 40 µs vs rank 1 30 µs; median 35
    assert strag[1] == {"step": 2, "slowest_rank": 0, "slowest_us": 40.0, "median_us": 35.0, "lead_us": 5.0}
    skew = rows(
        con, "SELECT process_group, n_instances, skew_p50_us FROM collective_skew WHERE run_id = 'r2'"
    )
    assert skew == [{"process_group": "0", "n_instances": 1, "skew_p50_us": 25.0}]
    # ends: hA 150 µs, hB 155 µs -> hB runs 5 µs ahead of the reference host hA
    clocks = rows(
        con, "SELECT host, ref_host, offset_us FROM clock_offsets WHERE run_id = 'r2' ORDER BY host"
    )
    assert clocks == [
        {"host": "hA", "ref_host": "hA", "offset_us": 0.0},
        {"host": "hB", "ref_host": "hA", "offset_us": 5.0},
    ]


def test_runs_from_traces_without_manifest(con):
    got = rows(con, "SELECT run_id, world_size, nodes, model FROM runs ORDER BY run_id")
    assert got == [
        {"run_id": "cpu", "world_size": 1, "nodes": 1, "model": None},
        {"run_id": "r1", "world_size": 1, "nodes": 1, "model": "tiny"},
        {"run_id": "r2", "world_size": 2, "nodes": 1, "model": "tiny"},
    ]


def test_energy_counts_only_the_runs_own_devices():
    from support.analysis_rawdb import kernel, raw_db, step

    events = [kernel("gemm", 0, 100, launch_us=0, device=0)]
    power = [  # the sampler logged both GPUs of the host; the run used GPU 0 only
        {"host": "h", "device": dev, "ts_unix_ns": t * 1000, "power_w": watts, "source": "nvidia-smi"}
        for dev, watts in ((0, 100.0), (1, 300.0))
        for t in (0, 200)
    ]
    con = raw_db(steps=[step(1, 0, 100)], events=events, power=power)
    # window [0, 100) µs at a flat 100 W on GPU 0: 100 W x 100e-6 s = 0.01 J; GPU 1 is not the run's
    got = rows(con, "SELECT device, energy_j FROM step_energy")
    assert [r["device"] for r in got] == [0] and got[0]["energy_j"] == pytest.approx(0.01)
