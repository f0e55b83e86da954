"""run_diff and `tracehouse diff`: what changed between two runs, per step, worked out by hand.

Run A, one rank, steps #1 [0, 100) and #2 [100, 200) µs: gemm 10-60 (step 1), gemm 110-150 and
an NCCL kernel 150-170 (step 2). Device windows: [10, 110) and [110, 170), so the step time is
median(100, 60) = 80 µs; over the 160 µs of windows compute is 90, exposed communication 20,
idle 50, so per step compute 80 x 90/160 = 45, exposed 10, other 0, idle 25 (sum 80). Per step,
gemm 90 / 2 windows = 45, NCCL 20 / 2 = 10.
Run B: gemm 10-40 and 110-130, NCCL 130-190. Windows [10, 110) and [110, 190): step time 90;
compute 50, exposed 60, idle 70 of 180: per step 25, 30, 0, 35 (sum 90); gemm 25, NCCL 30.
So B - A: step +10; compute -20, exposed +20, other 0, idle +10 (shares -2, 2, 0, 1); NCCL +20, gemm -20.
"""

from __future__ import annotations

import json

import pytest
from support.tracebuilder import cpu_op, kernel, runtime, step, write_trace
from tracehouse.pipeline.cli.main import main
from tracehouse.pipeline.common.errors import WarehouseError
from tracehouse.pipeline.compare import diff_runs
from tracehouse.pipeline.warehouse.database import open_for_query

BASE = 1_700_000_000 * 10**9
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def gpu_run(gemms: list[tuple[int, int]], nccl: tuple[int, int]) -> list[dict]:
    events = [step(1, 0, 100), step(2, 100, 100)]
    for corr, (start, end) in enumerate([*gemms, nccl], start=1):
        name = NCCL if (start, end) == nccl else "gemm"
        events += [
            runtime("cudaLaunchKernel", start, 1, correlation=corr),
            kernel(name, start, end - start, correlation=corr),
        ]
    return events


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    root = tmp_path_factory.mktemp("diff")
    for run, events in {
        "a": gpu_run([(10, 60), (110, 150)], (150, 170)),
        "b": gpu_run([(10, 40), (110, 130)], (130, 190)),
    }.items():
        (root / run).mkdir()
        write_trace(root / run / "r0.json", events, base_time_ns=BASE, distributed_info={"rank": 0})
    assert (
        main(["ingest", str(root / "a"), str(root / "b"), "--warehouse", str(root / "wh"), "--study", "s"])
        == 0
    )
    return root / "wh"


def test_components_and_kernels_by_hand(warehouse):
    with open_for_query(warehouse) as c:
        d = diff_runs(c, "a", "b")
    assert (str(d.a), str(d.b), d.step_a_us, d.step_b_us, d.step_change_us) == (
        "s/a",
        "s/b",
        80.0,
        90.0,
        10.0,
    )
    got = {
        r["name"]: (r["a_us_per_step"], r["b_us_per_step"], r["change_us"], r["share_of_step_change"])
        for r in d.components
    }
    assert got == {
        "exposed_comm": (10.0, 30.0, 20.0, 2.0),
        "idle": (25.0, 35.0, 10.0, 1.0),
        "other": (0.0, 0.0, 0.0, 0.0),
        "compute": (45.0, 25.0, -20.0, -2.0),
    }
    assert [r["name"] for r in d.components] == ["exposed_comm", "idle", "other", "compute"]  # largest first
    assert [(r["name"], r["class"], r["change_us"]) for r in d.regressions] == [(NCCL, "comm", 20.0)]
    assert [(r["name"], r["class"], r["change_us"]) for r in d.improvements] == [("gemm", "compute", -20.0)]


def test_the_reverse_pair_is_the_negation(warehouse):
    with open_for_query(warehouse) as c:
        forward, back = diff_runs(c, "a", "b"), diff_runs(c, "b", "a")
    assert back.step_change_us == -forward.step_change_us
    assert {r["name"]: -r["change_us"] for r in back.components} == {
        r["name"]: r["change_us"] for r in forward.components
    }


def test_the_command_prints_and_emits_json(warehouse, capsys):
    assert main(["diff", "a", "b", "--warehouse", str(warehouse)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["s/a -> s/b", "step time 80 us -> 90 us (+10 us, +12.5 %)"]
    assert out[3].split() == [
        "component",
        "class",
        "A",
        "us/step",
        "B",
        "us/step",
        "change",
        "us",
        "of",
        "step",
        "change",
    ]
    assert out[4].split() == ["exposed_comm", "10", "30", "+20", "200.0", "%"]
    assert main(["diff", "s/a", "s/b", "--warehouse", str(warehouse), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["step_change_us"] == 10.0 and data["regressions"][0]["name"] == NCCL


def test_unknown_or_same_runs_are_one_line(warehouse, capsys):
    with open_for_query(warehouse) as c:
        with pytest.raises(
            WarehouseError,
            match="no run 'zz' with a step time in the warehouse; runs with a step time: s/a, s/b",
        ):
            diff_runs(c, "a", "zz")
        with pytest.raises(WarehouseError, match="both runs are s/a"):
            diff_runs(c, "a", "s/a")
    assert main(["diff", "a", "zz", "--warehouse", str(warehouse)]) == 2
    assert capsys.readouterr().err.startswith("tracehouse diff: error: no run 'zz'")


def test_two_real_runs_of_the_sample_study(sample_warehouse):
    """Components sum to the step-time change, and step times are scale_points'."""
    with open_for_query(sample_warehouse) as c:
        d = diff_runs(c, "ddp-ws2", "ddp-ws4", top=5)
        step = dict(
            c.sql("SELECT run_id, step_time_us FROM scale_points WHERE run_id LIKE 'ddp-ws%'").fetchall()
        )
    assert (d.step_a_us, d.step_b_us) == (step["ddp-ws2"], step["ddp-ws4"])
    assert sum(r["change_us"] for r in d.components) == pytest.approx(d.step_change_us, abs=1e-6)
    assert sum(r["share_of_step_change"] for r in d.components) == pytest.approx(1.0, abs=1e-12)
    assert len(d.regressions) == 5 and all(r["change_us"] > 0 for r in d.regressions)
    assert [r["change_us"] for r in d.regressions] == sorted(
        (r["change_us"] for r in d.regressions), reverse=True
    )


def test_ops_and_modules_one_level_down_with_the_path_of_b(sample_warehouse, tmp_path):
    """Innermost ops and modules per step are op_breakdown's and module_breakdown's work over the rank
    step windows; on_path_b is whether B's stored critical path names the op (or an op of the module)."""
    import shutil

    warehouse = tmp_path / "wh"
    shutil.copytree(sample_warehouse, warehouse)
    args = ["project", "--warehouse", str(warehouse), "--study", "tiny-cpu-gloo", "--run", "ddp-ws4"]
    assert main([*args, "--world-sizes", "8"]) == 0
    with open_for_query(warehouse) as c:
        rows = c.sql(
            "SELECT item, kind, name, a_us_per_step, b_us_per_step, on_path_b FROM run_diff "
            "WHERE run_a = 'ddp-ws2' AND run_b = 'ddp-ws4'"
        ).pl()
        windows = dict(c.sql("SELECT run_id, count(*) FROM step_breakdown GROUP BY 1").fetchall())
        work = {
            (run, op): us
            for run, op, us in c.sql(
                "SELECT run_id, op, sum(work_us) FROM op_breakdown WHERE step IS NOT NULL "
                "AND run_id IN ('ddp-ws2', 'ddp-ws4') GROUP BY ALL"
            ).fetchall()
        }
        on_path = {
            op
            for (op,) in c.sql(
                "SELECT DISTINCT op FROM critical_path WHERE run_id = 'ddp-ws4' AND kind = 'compute'"
            ).fetchall()
        }
        reversed_pair = c.sql(
            "SELECT count(on_path_b) FROM run_diff WHERE run_a = 'ddp-ws4' AND run_b = 'ddp-ws2'"
        ).fetchall()[0][0]
    ops = rows.filter(rows["item"] == "innermost_op")
    assert ops.height == len({op for _, op in work})
    for r in ops.iter_rows(named=True):
        assert r["a_us_per_step"] == pytest.approx(work.get(("ddp-ws2", r["name"]), 0) / windows["ddp-ws2"])
        assert r["b_us_per_step"] == pytest.approx(work.get(("ddp-ws4", r["name"]), 0) / windows["ddp-ws4"])
        assert r["on_path_b"] == (r["name"] in on_path), r["name"]
    assert 0 < ops["on_path_b"].sum() < ops.height  # some ops on the path, some not
    modules = rows.filter(rows["item"] == "module")
    # a module rolls its ops up: the modules of a run hold all of its ops' work
    assert modules["b_us_per_step"].sum() == pytest.approx(ops["b_us_per_step"].sum(), rel=1e-9)
    assert set(modules["kind"]) == {"forward", "backward", "optimizer"} and modules["on_path_b"].all()
    assert rows.filter(rows["item"] == "component")["on_path_b"].is_null().all()
    assert reversed_pair == 0  # ddp-ws2 has no stored path: unknown, never false


def test_the_diff_does_not_depend_on_how_many_threads_add_it_up(sample_warehouse):
    """Every row of run_diff is the same, to the last bit, with one DuckDB thread or four: the op and
    module figures are sums over ranks and steps, and a float sum taken in the order the threads
    finish differs in its last bits run to run (a change of exactly 0 came out as 1e-13 in CI)."""
    rows = []
    with open_for_query(sample_warehouse) as c:
        for threads in (1, 4, 1, 4):
            c.execute(f"SET threads = {threads}")
            rows.append(
                c.sql(
                    "SELECT * FROM run_diff WHERE item IN ('innermost_op', 'module') ORDER BY ALL"
                ).fetchall()
            )
    assert rows[0] and all(r == rows[0] for r in rows[1:])


def test_a_gpu_runs_path_judges_the_ops_that_launched_its_kernels(tmp_path):
    """On a GPU rank the path names kernels; the op that launched each (op_launches) is on the path
    with its module: aten::mm launches the long gemm (on B's path), aten::add_ a kernel that runs
    while the gemm's stream is busy on another stream (never the path), aten::view launches nothing."""

    def run(gemm_us: int) -> list[dict]:
        events = [step(1, 0, 200)]
        events += [
            cpu_op("aten::mm", 5, 10),
            runtime("cudaLaunchKernel", 10, 1, correlation=1),
            kernel("gemm", 12, gemm_us, correlation=1),
            cpu_op("aten::add_", 20, 10),
            runtime("cudaLaunchKernel", 22, 1, correlation=2),
            kernel("add_kernel", 24, 2, correlation=2, stream=8),
            cpu_op("aten::view", 40, 5),
        ]
        return events

    for name, gemm_us in {"a": 50, "b": 120}.items():
        (tmp_path / name).mkdir()
        write_trace(
            tmp_path / name / "r0.json", run(gemm_us), base_time_ns=BASE, distributed_info={"rank": 0}
        )
    warehouse = tmp_path / "wh"
    assert (
        main(
            [
                "ingest",
                str(tmp_path / "a"),
                str(tmp_path / "b"),
                "--warehouse",
                str(warehouse),
                "--study",
                "s",
            ]
        )
        == 0
    )
    assert (
        main(["project", "--warehouse", str(warehouse), "--study", "s", "--run", "b", "--world-sizes", "2"])
        == 0
    )
    with open_for_query(warehouse) as c:
        path = c.sql(
            "SELECT s.op, o.name FROM critical_path_segments AS s LEFT JOIN ops AS o "
            "ON o.run_id = s.run_id AND o.rank = s.rank AND o.op_id = s.op_id "
            "WHERE s.run_id = 'b' AND s.kind = 'compute'"
        ).fetchall()
        rows = {
            (item, name): on_path
            for item, name, on_path in c.sql(
                "SELECT item, name, on_path_b FROM run_diff WHERE run_a = 'a' AND run_b = 'b' "
                "AND item IN ('innermost_op', 'module')"
            ).fetchall()
        }
    assert ("gemm", "aten::mm") in path  # the stored segment names the kernel and its launching op
    assert rows[("innermost_op", "aten::mm")] is True
    assert rows[("innermost_op", "aten::add_")] is False
    assert rows.get(("innermost_op", "aten::view"), False) is False  # launches nothing: never on it
    assert rows[("module", "(no module)")] is True
