"""`tracehouse project`: replay measured runs and project their steps to other world sizes."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

from tracehouse.pipeline.cli.options import add_warehouse_option
from tracehouse.pipeline.common.errors import TracehouseError

if TYPE_CHECKING:
    from tracehouse.pipeline.projection.project import RunProjection
    from tracehouse.pipeline.projection.results import ProjectedPoint, Projections
    from tracehouse.pipeline.projection.search import Ranking


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `project` subcommand."""
    p = sub.add_parser(
        "project",
        help="replay measured runs and project them to more devices, a faster network or faster GPUs",
        description="Replay each run's steps from their dependencies and durations (checked against the "
        "measured step times), then again under a scenario at each world size, growing data "
        "parallelism. Collective transfers come from --network FILE or from a fit of the warehouse's "
        "network_curves (nccl-tests output, tracehouse calibrate, the runs' own collectives). Stores the "
        "points in the projections table and prints them beside the study's measured points, with the "
        "knee: the smallest world size at which an added device brings less than half the measured "
        "throughput per device (or why it cannot be found). A run measured on one data-parallel rank "
        "whose data-parallel collectives cannot be planned is not scaled along data parallelism (the "
        "reason is printed); a point with less than one sequence per data-parallel rank is flagged. "
        "Across a study, a run that cannot be projected is listed and the command exits 1.",
    )
    add_warehouse_option(p)
    p.add_argument("--study", required=True, metavar="S", help="the study")
    p.add_argument("--run", metavar="R", help="one run (default: every run of the study)")
    p.add_argument(
        "--devices",
        "--world-sizes",
        dest="world_sizes",
        type=world_sizes,
        metavar="16,32,...",
        help="world sizes to project to (--devices is another name for it); or give --layout",
    )
    p.add_argument(
        "--layout",
        nargs="+",
        type=layout_spec,
        metavar="SPEC",
        help="layouts to project to, each dp=N (DDP) or fsdp=N, with tp=N, pp=N joined by commas "
        "(fsdp=64,tp=2): their world sizes, and the data-parallel kind, which may differ from the run's "
        "(a DDP run projected as FSDP plans FSDP's all-gathers and reduce-scatters in place of its "
        "all-reduces, CPU runs); tp may be added to a run without it (its matmul and attention ops "
        "split, each layer's all-reduces planned), or pp with microbatches=M and schedule=gpipe|1f1b "
        "(its layers cut into stages replayed per micro-batch in that schedule's order, GPipe's where not "
        "given, dp=N only): CPU runs of tracehouse's reference Llama",
    )
    p.add_argument(
        "--search",
        action="store_true",
        help="also rank the study's layouts at each world size by projected tokens/s (with their error "
        "band and tokens per joule where power was measured): each run as measured, as the other "
        "data-parallel kind and, without tp or pp, split over the tp degrees its model allows; needs "
        "every run (no --run)",
    )
    p.add_argument(
        "--network",
        metavar="FILE",
        help="network description: a TOML file (docs/projection.md) or a shipped one by name "
        "(dgx-a100, dgx-h100, mi300x-platform)",
    )
    p.add_argument(
        "--devices-per-node",
        type=int,
        metavar="N",
        help="devices each node has, where projected ranks are placed (default: the largest node_devices "
        "of the study's manifests, else the most devices a run used per node, said in the notes, else 8)",
    )
    p.add_argument("--compute-speedup", type=float, default=1.0, metavar="F", help="every compute cost / F")
    p.add_argument(
        "--matmul-speedup", type=float, default=1.0, metavar="F", help="matmul/attention kernels / F more"
    )
    p.add_argument("--memory-speedup", type=float, default=1.0, metavar="F", help="copies and memsets / F")
    p.add_argument("--ideal-network", action="store_true", help="zero transfer time for every collective")
    p.add_argument(
        "--weak-scaling", action="store_true", help="fixed per-device batch (default: fixed global)"
    )
    p.add_argument(
        "--grad-compression",
        type=float,
        default=1.0,
        metavar="F",
        help="data-parallel gradient reductions (all-reduce, reduce-scatter) move bytes / F",
    )
    p.add_argument(
        "--comm-dtype",
        metavar="DTYPE",
        help="every float collective moves this element type (fp32, bf16, fp16, fp8): bytes x its size / "
        "the measured one's",
    )
    p.add_argument(
        "--bucket-mb",
        type=float,
        metavar="MB",
        help="DDP runs: gradient all-reduces regrouped into buckets of MB (1e6 bytes; DDP's default "
        "bucket_cap_mb is 25), each issued where its last gradient was ready",
    )
    p.add_argument(
        "--device-memory",
        type=float,
        metavar="GB",
        help="memory per device in GB (1e9 bytes) that each projected point must fit (default: the run's "
        "device's, from the hardware table; unknown for a CPU)",
    )
    p.add_argument(
        "--no-interference",
        action="store_true",
        help="time every transfer at its network time, overlapped or not (default: transfers "
        "stretch while their ranks compute, by a factor fitted on the study's runs)",
    )
    p.add_argument(
        "--scenario", metavar="NAME", help="name stored with the points (default: from the options)"
    )
    p.add_argument("--json", action="store_true", help="print the projections as JSON")
    p.set_defaults(handler=handle)


def world_sizes(text: str) -> list[int]:
    """Comma-separated positive integers."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not sizes or any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError(f"world sizes must be positive integers: {text!r}")
    return sizes


def layout_spec(text: str):
    """One --layout value (projection/layouts.py)."""
    from tracehouse.pipeline.projection.layouts import parse_layout

    try:
        return parse_layout(text)
    except TracehouseError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def layout_choice(args: argparse.Namespace):
    """The world sizes and the layout family (None: the runs' own) that --devices or --layout ask for."""
    from tracehouse.pipeline.projection.layouts import layout_family

    if args.layout is None:
        if args.world_sizes is None:
            raise TracehouseError("give the world sizes to project to (--devices 16,32,...) or --layout")
        return args.world_sizes, None
    if args.world_sizes is not None:
        raise TracehouseError("give --devices or --layout, not both (a layout's world size is dp x tp x pp)")
    family = layout_family(args.layout)
    return family.world_sizes, family


def handle(args: argparse.Namespace) -> int:
    """Project, store, print."""
    from tracehouse.pipeline.projection.network import network_path
    from tracehouse.pipeline.projection.project import project_study  # the replay loads only when it runs
    from tracehouse.pipeline.projection.scenario import Scenario
    from tracehouse.pipeline.projection.timeline import LoadedRuns

    if args.devices_per_node is not None and args.devices_per_node < 1:
        raise TracehouseError("--devices-per-node must be a positive integer")
    if args.search and args.run is not None:
        raise TracehouseError("--search ranks every run of the study: leave out --run")
    network = None if args.network is None else network_path(args.network)
    sizes, family = layout_choice(args)
    try:
        scenario = Scenario(
            **(family.changes() if family else {}),
            compute_speedup=args.compute_speedup,
            matmul_speedup=args.matmul_speedup,
            memory_speedup=args.memory_speedup,
            ideal_network=args.ideal_network,
            weak_scaling=args.weak_scaling,
            interference=not args.no_interference,
            grad_compression=args.grad_compression,
            comm_dtype=args.comm_dtype,
            device_memory=None if args.device_memory is None else args.device_memory * 1e9,
            bucket_bytes=None if args.bucket_mb is None else args.bucket_mb * 1e6,
        )
    except TracehouseError as exc:
        raise TracehouseError(f"invalid scenario: {exc}") from exc
    loaded = LoadedRuns()  # the search projects each run again in every layout it tries
    results = project_study(
        args.warehouse,
        study=args.study,
        run_id=args.run,
        world_sizes=sizes,
        scenario=scenario,
        model_parallel=family.model_parallel if family else None,
        scenario_name=args.scenario or scenario.short_name(network),
        network_file=network,
        devices_per_node=args.devices_per_node,
        progress=None if args.json else lambda line: print(f"tracehouse project: {line}", file=sys.stderr),
        loaded=loaded,
    )
    ranked = searched(results, args, scenario, network, loaded) if args.search else None
    rankings = [ranked.ranking(n) for n in sizes] if ranked is not None else []
    if args.json:
        runs = [to_json(r) for r in results]
        shown = {"projections": runs, "search": [r.to_dict() for r in rankings]} if args.search else runs
        print(json.dumps(shown, indent=1))
    else:
        for result in results:
            print("\n".join(render(result)))
        name = args.scenario or scenario.short_name(network)
        for ranking in rankings:
            print("\n".join(render_ranking(ranking, args.study, name)))
    for run, why in results.failed.items():
        print(f"tracehouse project: {args.study}/{run} not projected: {why}", file=sys.stderr)
    if results.failed:
        print(
            f"tracehouse project: {len(results)} run(s) projected, {len(results.failed)} not",
            file=sys.stderr,
        )
    return 1 if results.failed else 0


def searched(results: Projections, args: argparse.Namespace, scenario, network, loaded) -> Projections:
    """What --search ranks: the runs as measured and, without --layout, each run as the other
    data-parallel kind where it can be projected so (the reason where not, in the ranking only)."""
    from tracehouse.pipeline.projection.project import with_other_kinds

    if args.layout is not None:
        return results
    return with_other_kinds(
        results,
        args.warehouse,
        study=args.study,
        world_sizes=args.world_sizes,
        scenario=scenario,
        scenario_name=args.scenario,
        network_file=network,
        devices_per_node=args.devices_per_node,
        progress=None if args.json else lambda line: print(f"tracehouse project: {line}", file=sys.stderr),
        loaded=loaded,
    )


def to_json(result: RunProjection) -> dict:
    """One run's projection as JSON."""
    return {
        "study": result.facts.study,
        "run_id": result.facts.run_id,
        "identity": {
            "median_error": result.identity.median_error,
            "max_error": result.identity.max_error,
            "steps": [
                {"step": step, "measured_us": m, "replayed_us": r}
                for step, (m, r) in result.identity.steps.items()
            ],
        },
        "knee_world_size": result.knee,
        "knee_note": result.knee_note,
        "notes": result.notes,
        "refused": [{"world_size": size, "reason": why} for size, why in result.refused.items()],
        "points": [p.to_dict() for p in result.points],
        "checks": [{**asdict(c), "error": c.error, "doublings": c.doublings} for c in result.checks],
    }


def _cell(value: float | None, width: int, digits: int = 1, scale: float = 1.0) -> str:
    return f"{value * scale:{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def _band(p: ProjectedPoint) -> str:
    """The point's error band as a factor on its step time (x1.23), or - when it has none."""
    if p.step_time_high_us is None or not p.step_time_us:
        return "-"
    factor = p.step_time_high_us / p.step_time_us
    return f"x{factor:.3g}" if factor < 1000 else f"x{factor:.0e}"


def _band_words(p: ProjectedPoint) -> str:
    """What the band rests on, from the point's provenance."""
    band = json.loads(p.provenance or "{}").get("band")
    if not band:
        return "none (not recorded)"
    words = (
        f"the step time within a factor exp(replay error + {band['rate_per_doubling']:.3g} per doubling "
        f"from the measured world size); {band['basis']}"
    )
    worst = band.get("worst")
    if worst:
        words += (
            f"; worst: {worst['run']} from {worst['from']} to {worst['to']} device(s) against "
            f"{worst['measured_run']}, {100 * math.expm1(worst['error']):+.1f} %"
        )
    if band.get("layout_basis"):
        words += (
            "; with a changed layout (data-parallel kind, tp or pp), a factor "
            f"exp({band['layout_error']:.3g}) more: "
            f"{band['layout_basis']}"
        )
    return words


def render_ranking(ranking: Ranking, study: str, scenario: str) -> list[str]:
    """The study's layouts at one world size, best first, as aligned text."""
    n = ranking.world_size
    wide = max([30, *(len(c.layout) for c in ranking.candidates)])  # every layout whole
    lines = [
        f"search at {n:,} devices ({study}, {scenario}): {len(ranking.candidates)} layout(s) ranked by "
        "projected tokens/s",
        f"  rank  run                   {'layout':{wide}s}        tokens/s   band (tokens/s)   "
        "        tok/s/dev   tokens/J  exposed",
    ]
    for i, c in enumerate(ranking.candidates, 1):
        band = f"{c.tokens_per_s_low:,.4g} - {c.tokens_per_s_high:,.4g}"
        per_joule = f"{c.tokens_per_j:10.4g}" if c.tokens_per_j is not None else f"{'-':>10}"
        lines.append(
            f"  {i:4d}  {c.run_id:20.20s}  {c.layout:{wide}s}  {c.tokens_per_s:14,.1f}   {band:22.22s}"
            f"  {c.tokens_per_s_per_device:10,.2f} {per_joule} {100 * c.exposed_comm_frac:7.1f}%"
        )
    best = ranking.most_tokens_per_j
    lines.append(
        f"  most tokens per joule: {best.run_id} ({best.tokens_per_j:.4g})"
        if best is not None
        else "  tokens per joule: no ranked run measured power"
    )
    lines.extend(f"  not ranked: {run}: {why}" for run, why in ranking.left_out.items())
    lines.append(f"  {ranking.memory}")
    return lines


def render(result: RunProjection) -> list[str]:
    """One run's projection as aligned text: each projected point beside the measured one where a
    run of the study measured that world size, the world sizes not projected and why, the knee."""
    f = result.facts
    identity = result.identity
    lines = [
        f"{f.study}/{f.run_id} (measured at {f.world_size} device(s)): replay of the measured steps within "
        f"{100 * identity.median_error:.2f} % median, {100 * identity.max_error:.2f} % max",
        "   devices    step ms (measured)    band  tok/s/dev (measured)    eff  compute  exposed   idle"
        "  layout",
    ]
    measured_by = []
    rows = sorted(
        [(p.world_size, p) for p in result.points] + list(result.refused.items()), key=lambda r: r[0]
    )
    for size, p in rows:
        if isinstance(p, str):
            lines.append(f"  {size:8d}  not projected (see below)")
            continue
        fracs = (p.compute_frac, p.exposed_comm_frac, p.idle_frac)
        mark = ("  <- knee" if p.knee else "") + ("  (flagged)" if p.flag else "")
        step = f"{_cell(p.step_time_us, 10, 2, 1e-3)} {_cell(p.measured_step_time_us, 10, 2, 1e-3)}"
        step += f" {_band(p):>7}"
        lines.append(
            f"  {p.world_size:8d} {step}"
            f" {_cell(p.tokens_per_s_per_device, 10)} {_cell(p.measured_tokens_per_s_per_device, 10)}"
            f" {_cell(p.scaling_efficiency, 6, 2)} {100 * fracs[0]:7.1f}% {100 * fracs[1]:7.1f}% "
            f"{100 * fracs[2]:5.1f}%  {p.layout}{mark}"
        )
        if p.measured_run_id is not None:
            measured_by.append(f"{p.world_size} by {p.measured_run_id}")
    if measured_by != [f"{f.world_size} by {f.run_id}"] * (len(measured_by) > 0):
        lines.append(f"  measured: {', '.join(measured_by)}")
    if result.points:
        lines.append(f"  assumptions: {result.points[0].assumptions}")
        lines.append(f"  band: {_band_words(result.points[0])}")
    lines.extend(f"  note: {note}" for note in result.notes)
    flagged: dict[str, list[int]] = {}
    for p in result.points:
        if p.flag:
            flagged.setdefault(p.flag, []).append(p.world_size)
    lines.extend(f"  flagged at {', '.join(map(str, sizes))}: {why}" for why, sizes in flagged.items())
    lines.append(f"  {result.knee_note}")
    return lines
