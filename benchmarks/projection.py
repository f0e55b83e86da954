"""The projection's figures, measured in one run (issue #13's validation).

1. Identity: replaying the measured durations, per trace, median and max step-time error over
   the steps (every multi-step trace of ../shared/data/traces and every sample run).
2. CPU world size 2 from world size 1: real `tracehouse collect` runs of the tiny model at world
   sizes 1 and 2 (DDP and FSDP), a real `tracehouse calibrate --world-size 2`; the world-size-1 runs
   and the calibration go in one warehouse, the world-size-2 runs in another; the projection of each
   world-size-1 run to 2 devices against the measured world-size-2 step time.
3. A sample run projected to 2,048 devices on its own calibration, with its knee.
4. How far to trust it: the sample study's checks (each run projected to the world sizes where
   another run of its workload was measured), its error rate per doubling and the band it gives.
5. The search: the sample study's layouts ranked at 512 and 2,048 devices on the DGX H100
   description (weak scaling: the sample's global batch of 8 sequences has no runnable
   configuration at 512 devices under strong scaling).
6. A change of data-parallel kind (`--layout`): each sample DDP run projected as FSDP and each
   FSDP run as DDP at 1, 2 and 4 devices, and the tensor-parallel runs (tp=2) as the other kind at
   data-parallel degrees 1 and 2, against the run of that kind measured there, with the breakdown's
   components.
7. Tensor parallelism added (`--layout ...,tp=2`): each sample DDP and FSDP run split over 2 ranks
   at data-parallel degrees 1 and 2, against the tp run measured there (tp-ws2, fsdp_tp-ws4-tp2).
8. Pipeline parallelism added (`--layout dp=...,pp=2`): each sample DDP and FSDP run as a pipeline
   of 2 stages at data-parallel degrees 1 and 2, against pp-ws2.
9. A pipeline's schedule: ddp-ws1 and ddp-ws2 as dp=1,pp=2,microbatches=4 in GPipe's and in 1F1B's
   order (projected only: tracehouse collect's pipelines run GPipe).

Usage: python benchmarks/projection.py [--dir /tmp/projbench] [--skip-collect]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "traces"
sys.path.insert(0, str(REPO / "tests"))


def tracehouse(*args: str) -> str:
    """Run the real command; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "tracehouse.pipeline.cli", *args], capture_output=True, text=True
    )
    if done.returncode not in (0, 1):
        raise SystemExit(
            f"tracehouse {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        )
    return done.stdout


def identity(root: Path) -> None:
    from tracehouse.pipeline.ingest.driver import ingest
    from tracehouse.pipeline.projection.build import build_run_graph
    from tracehouse.pipeline.projection.project import identity_check
    from tracehouse.pipeline.projection.timeline import load_run
    from tracehouse.pipeline.warehouse.reading import open_reader

    warehouse = root / "identity"
    ingest(sorted(p.parent for p in (REPO / "sample_traces").rglob("manifest.json")), warehouse)
    by_run: dict[str, list[Path]] = {}
    for path in sorted(SHARED.rglob("*.json*")):
        stem = path.name.split(".json")[0].removesuffix(".pt.trace")
        by_run.setdefault("pair_sampled" if stem.startswith("pair_sampled") else stem, []).append(path)
    for run, paths in by_run.items():
        if ingest(paths, warehouse, study="shared", run=run).failed:
            ingest(paths, warehouse, study="shared", run=run, ranks={str(paths[0]): 0})
    print("1. identity replay (measured durations), step-time error per trace")
    print(f"   {'run':<48} {'steps':>5} {'median':>8} {'max':>8} {'replay s':>8}")
    with open_reader(warehouse) as con:
        runs = con.execute(
            """SELECT study, run_id FROM step_breakdown WHERE step IS NOT NULL GROUP BY 1, 2
               HAVING count(DISTINCT step) >= 2 ORDER BY 1, 2"""
        ).fetchall()
        for study, run_id in runs:
            started = time.perf_counter()
            timeline = load_run(con, study, run_id)
            graph = build_run_graph(timeline)
            check = identity_check(graph, timeline.measured_windows())
            seconds = time.perf_counter() - started
            print(
                f"   {study + '/' + run_id:<48} {len(check.steps):5d} {100 * check.median_error:7.3f}% "
                f"{100 * check.max_error:7.3f}% {seconds:8.2f}"
            )


def world_size_two(root: Path, skip_collect: bool) -> None:
    runs = root / "runs"
    if not skip_collect:
        shutil.rmtree(runs, ignore_errors=True)
        for strategy, size in (("ddp", 1), ("ddp", 2), ("fsdp", 1), ("fsdp", 2), ("tp", 2), ("pp", 2)):
            tracehouse(
                "collect",
                "--model",
                "tiny",
                "--strategy",
                strategy,
                "--world-size",
                str(size),
                "--steps",
                "6",
                "--study",
                f"ws{size}",
                "--out",
                str(runs / f"ws{size}"),
            )
        tracehouse("calibrate", "--world-size", "2", "--out", str(runs / "calibration"))
    one, two = root / "wh-ws1", root / "wh-ws2"
    for folder in (one, two):
        shutil.rmtree(folder, ignore_errors=True)
    tracehouse("ingest", str(runs / "ws1"), str(runs / "calibration"), "--warehouse", str(one))
    tracehouse("ingest", str(runs / "ws2"), "--warehouse", str(two))
    measured = json.loads(
        tracehouse(
            "query",
            "SELECT run_id, step_time_us, compute_frac, exposed_comm_frac, other_frac, idle_frac "
            "FROM scale_points",
            "--warehouse",
            str(two),
            "--format",
            "json",
        )
    )
    truth_by_strategy = {row["run_id"].split("-")[0]: row for row in measured}
    print(
        "\n2. CPU world size 2 projected from a world-size-1 run and a world-size-2 calibration "
        "(DDP and FSDP as measured; TP and PP: --layout dp=1,tp=2 and dp=1,pp=2)"
    )
    print(
        "   components: compute / exposed communication / other / idle, % of the step; error: projected "
        "- measured (points)"
    )
    header = f"   {'run':<16} {'model':<16} {'step ms':>8} {'measured':>9} {'error':>7}  components (error)"
    print(header)
    study = ["--warehouse", str(one), "--study", "ws1", "--json"]
    for label, extra in (("interference", []), ("no interference", ["--no-interference"])):
        projected = [
            (None, run) for run in json.loads(tracehouse("project", *study, "--world-sizes", "2", *extra))
        ]
        for strategy, layout in (("tp", "dp=1,tp=2"), ("pp", "dp=1,pp=2")):
            for source in ("ddp-ws1", "fsdp-ws1"):
                changed = tracehouse("project", *study, "--run", source, "--layout", layout, *extra)
                projected += [(strategy, run) for run in json.loads(changed)]
        for strategy, run in projected:
            points = {p["world_size"]: p for p in run["points"]}
            truth = truth_by_strategy.get(strategy or run["run_id"].split("-")[0])
            if 2 not in points or truth is None:  # refused: its data-parallel collectives cannot be planned
                print(f"   {run['run_id']:<16} {label:<16} not projected: {'; '.join(run['notes'])}")
                continue
            guess = points[2]
            error = 100 * (guess["step_time_us"] - truth["step_time_us"]) / truth["step_time_us"]
            parts = " / ".join(
                f"{100 * guess[c]:.1f} ({100 * (guess[c] - truth[c]):+.1f})"
                for c in ("compute_frac", "exposed_comm_frac", "other_frac", "idle_frac")
            )
            name = run["run_id"] if strategy is None else f"{run['run_id']} as {strategy}"
            print(
                f"   {name:<16} {label:<16} {guess['step_time_us'] / 1e3:8.2f} "
                f"{truth['step_time_us'] / 1e3:9.2f} {error:+6.1f}%  {parts}"
            )
    for strategy, row in sorted(truth_by_strategy.items()):
        shares = " / ".join(
            f"{100 * row[c]:.1f}" for c in ("compute_frac", "exposed_comm_frac", "other_frac", "idle_frac")
        )
        print(f"   measured {strategy} at world size 2: {row['step_time_us'] / 1e3:.2f} ms, {shares}")


def to_2048(root: Path) -> None:
    warehouse = root / "identity"
    sizes = ",".join(str(2**k) for k in range(1, 12))
    print("\n3. sample runs projected to 2,048 devices (strong scaling, each run's own calibration)")
    for run in ("ddp-ws2", "fsdp-ws2"):
        out = tracehouse(
            "project",
            "--warehouse",
            str(warehouse),
            "--study",
            "tiny-cpu-gloo",
            "--run",
            run,
            "--world-sizes",
            sizes,
            "--devices-per-node",
            "8",
        )
        print("\n".join("   " + line for line in out.splitlines()))


def band_and_search(root: Path) -> None:
    import duckdb

    warehouse = root / "identity"
    study = ["--warehouse", str(warehouse), "--study", "tiny-cpu-gloo"]
    tracehouse("project", *study, "--world-sizes", "2,4,8")
    print("\n4. the sample study's checks: projected against another run's measured step time")
    with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT run_id, world_size, check_world_size, measured_run_id, projected_step_time_us / 1e3, "
            "measured_step_time_us / 1e3, exp(log_error) - 1, abs(log_error) / doublings "
            "FROM projection_checks WHERE study = 'tiny-cpu-gloo' ORDER BY ALL"
        ).fetchall()
    print(
        f"   {'run':<10} {'from':>4} {'to':>4} {'measured by':<10} {'proj ms':>9} {'meas ms':>9} {'error':>8}"
    )
    for run, a, b, other, projected, measured, error, _ in rows:
        print(f"   {run:<10} {a:>4} {b:>4} {other:<10} {projected:9.2f} {measured:9.2f} {100 * error:+7.1f}%")
    worst = max(rows, key=lambda r: r[7], default=None)
    if worst is not None:
        print(
            f"   rate: {worst[7]:.3f} per doubling (worst: {worst[0]} from {worst[1]} to {worst[2]}); "
            "a point d doublings away lies within a factor exp(replay + rate x d) of its step time"
        )
    print("\n5. --search at 512 and 2,048 devices, DGX H100 description, weak scaling")
    out = tracehouse(
        "project", *study, "--search", "--devices", "512,2048", "--network", "dgx-h100", "--weak-scaling"
    )
    shown = out[out.index("search at") :] if "search at" in out else out
    print("\n".join("   " + line for line in shown.splitlines()))


def layout_change(root: Path) -> None:
    print("\n6. a change of data-parallel kind (--layout) against the run of that kind measured there")
    changes = [(run, "fsdp", (1, 2, 4)) for run in ("ddp-ws1", "ddp-ws2")]
    changes += [(run, "dp", (1, 2, 4)) for run in ("fsdp-ws1", "fsdp-ws2")]
    # tensor-parallel runs (tp=2) as the other kind: against the 2-rank tp-ws2 and the 4-rank
    # fsdp_tp-ws4-tp2 (4 ranks on 2 cores: oversubscribed, its step time shows structure, not speed)
    changes += [("tp-ws2", "fsdp", (1, 2), ",tp=2"), ("fsdp_tp-ws4-tp2", "dp", (1, 2), ",tp=2")]
    layout_rows(root, changes)
    print("\n7. tensor parallelism added (--layout ...,tp=2) against the tp run measured there")
    changes = [(run, "dp", (1, 2), ",tp=2") for run in ("ddp-ws1", "ddp-ws2")]
    changes += [(run, "fsdp", (1, 2), ",tp=2") for run in ("fsdp-ws1", "fsdp-ws2")]
    layout_rows(root, changes)
    print("\n8. pipeline parallelism added (--layout dp=...,pp=2) against the pp run measured there")
    layout_rows(
        root, [(run, "dp", (1, 2), ",pp=2") for run in ("ddp-ws1", "ddp-ws2", "fsdp-ws1", "fsdp-ws2")]
    )
    schedules(root)


def schedules(root: Path) -> None:
    """GPipe against 1F1B on the same pipelines (no run measures 1F1B: tracehouse collect's is GPipe)."""
    import duckdb

    print("\n9. a pipeline's schedule: each run as dp=1,pp=2,microbatches=4 in GPipe's and in 1F1B's order")
    warehouse = root / "identity"
    study = ["--warehouse", str(warehouse), "--study", "tiny-cpu-gloo"]
    print(f"   {'run':<10} {'schedule':<9} {'proj ms':>8}   compute / exposed / idle, % of the step")
    for run in ("ddp-ws1", "ddp-ws2"):
        for schedule in ("gpipe", "1f1b"):
            name = f"bench-{schedule}"
            layout = f"dp=1,pp=2,microbatches=4,schedule={schedule}"
            tracehouse("project", *study, "--run", run, "--layout", layout, "--scenario", name)
            with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as con:
                ((ms, compute, exposed, idle),) = con.execute(
                    "SELECT step_time_us / 1e3, compute_frac, exposed_comm_frac, idle_frac FROM projections "
                    "WHERE run_id = ? AND scenario = ? AND world_size = 2",
                    [run, name],
                ).fetchall()
            parts = " / ".join(f"{100 * f:.1f}" for f in (compute, exposed, idle))
            print(f"   {run:<10} {schedule:<9} {ms:8.2f}   {parts}")


def layout_rows(root: Path, changes: list[tuple]) -> None:
    """Each (run, kind, data-parallel degrees[, tp suffix]) projected to its layouts, beside the run
    measured there: step time and the breakdown's components."""
    import duckdb

    warehouse = root / "identity"
    study = ["--warehouse", str(warehouse), "--study", "tiny-cpu-gloo"]
    print(
        f"   {'run':<15} {'as':<24} {'measured by':<15} {'proj ms':>8} {'meas ms':>8} {'error':>8}"
        "   components: compute / exposed / other / idle, % of the step (error in points)"
    )
    for run, kind, degrees, *tp in changes:
        name = f"bench-{kind}{''.join(tp)}"
        layouts = [f"{kind}={n}{''.join(tp)}" for n in degrees]
        tracehouse("project", *study, "--run", run, "--layout", *layouts, "--scenario", name)
        with duckdb.connect(str(warehouse / "tracehouse.duckdb"), read_only=True) as con:
            rows = con.execute(
                """SELECT p.layout, p.measured_run_id, p.step_time_us / 1e3, p.measured_step_time_us / 1e3,
                          [p.compute_frac, p.exposed_comm_frac, p.other_frac, p.idle_frac],
                          [s.compute_frac, s.exposed_comm_frac, s.other_frac, s.idle_frac]
                   FROM projections p
                   JOIN scale_points s ON s.study = p.study AND s.run_id = p.measured_run_id
                   WHERE p.run_id = ? AND p.scenario = ? ORDER BY p.world_size""",
                [run, name],
            ).fetchall()
        for layout, other, projected, measured, fracs, measured_fracs in rows:
            parts = " / ".join(
                f"{100 * f:.1f} ({100 * (f - m):+.1f})" for f, m in zip(fracs, measured_fracs, strict=True)
            )
            error = 100 * (projected / measured - 1)
            print(
                f"   {run:<15} {layout:<24} {other:<15} {projected:8.2f} {measured:8.2f} {error:+7.1f}%"
                f"   {parts}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--skip-collect", action="store_true", help="reuse the runs of an earlier --dir")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="projbench-"))
    root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(root / "identity", ignore_errors=True)
    identity(root)
    world_size_two(root, args.skip_collect)
    to_2048(root)
    band_and_search(root)
    layout_change(root)


if __name__ == "__main__":
    main()
