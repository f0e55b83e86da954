"""`tracehouse diff RUN_A RUN_B --warehouse DIR`: what changed between two runs, largest first."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from tracehouse.pipeline.cli.options import add_warehouse_option

if TYPE_CHECKING:
    from tracehouse.pipeline.compare import RunDiff


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `diff` subcommand."""
    p = sub.add_parser(
        "diff",
        help="compare two runs per step: components and kernels/ops, largest change first",
        description="Compare run B with run A per step: the step-time components (compute, exposed "
        "communication, other, idle: their changes sum to the step-time change) and the kernels or ops "
        "whose time per step changed most, regressions first; then the innermost ops and module paths that "
        "changed most, and whether run B's critical path (stored by tracehouse project) runs through "
        "each. A run is RUN, or STUDY/RUN when run ids "
        "repeat across studies. Reads the run_diff view.",
    )
    p.add_argument("run_a", metavar="RUN_A", help="the baseline run")
    p.add_argument("run_b", metavar="RUN_B", help="the run compared with it")
    add_warehouse_option(p)
    p.add_argument("--study", help="study of both runs, when their ids repeat across studies")
    p.add_argument("--top", type=int, default=10, metavar="N", help="kernels/ops shown each way (default 10)")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the comparison."""
    from tracehouse.pipeline.compare import diff_runs  # the warehouse loads only when it runs
    from tracehouse.pipeline.warehouse.reading import open_reader

    with open_reader(args.warehouse) as connection:
        result = diff_runs(connection, args.run_a, args.run_b, study=args.study, top=args.top)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
    else:
        print("\n".join(render(result)))
    return 0


def render(result: RunDiff) -> list[str]:
    """The comparison as aligned text lines."""
    pct = 100 * result.step_change_us / result.step_a_us if result.step_a_us else float("nan")
    lines = [
        f"{result.a} -> {result.b}",
        f"step time {_us(result.step_a_us)} -> {_us(result.step_b_us)} "
        f"({_signed(result.step_change_us)}, {pct:+.1f} %)",
        "",
        *_table("component", result.components),
    ]
    for title, rows in (("regressions", result.regressions), ("improvements", result.improvements)):
        lines += ["", *_table(title, rows)] if rows else []
    for title, rows in (("innermost ops", result.ops), ("modules", result.modules)):
        lines += ["", *_table(title, rows, path=True)] if rows else []
    return lines


def _table(title: str, rows: list[dict[str, Any]], *, path: bool = False) -> list[str]:
    """Aligned rows; with `path`, a last column saying whether B's critical path runs through each."""
    head = (
        title,
        "class",
        "A us/step",
        "B us/step",
        "change us",
        "of step change",
        *(["on B's path"] if path else []),
    )
    cells = [
        (
            r["name"],
            r["class"] or ("" if r["item"] == "component" else r["kind"]),
            _us(r["a_us_per_step"], unit=""),
            _us(r["b_us_per_step"], unit=""),
            _signed(r["change_us"], unit=""),
            "" if r["share_of_step_change"] is None else f"{100 * r['share_of_step_change']:.1f} %",
            *([{True: "yes", False: "no", None: "unknown"}[r["on_path_b"]]] if path else []),
        )
        for r in rows
    ]
    name_width = min(60, max(len(head[0]), *(len(c[0]) for c in cells)))
    widths = [name_width, *(max(len(head[i]), *(len(c[i]) for c in cells)) for i in range(1, len(head)))]

    def line(values: tuple[str, ...]) -> str:
        name = values[0] if len(values[0]) <= name_width else values[0][: name_width - 1] + "…"
        rest = [
            values[1].ljust(widths[1]),
            *(v.rjust(w) for v, w in zip(values[2:], widths[2:], strict=True)),
        ]
        return "  ".join([name.ljust(name_width), *rest]).rstrip()

    return [line(head), *(line(c) for c in cells)]


def _us(value: float, unit: str = " us") -> str:
    return f"{value:,.0f}{unit}"


def _signed(value: float, unit: str = " us") -> str:
    return f"{value:+,.0f}{unit}"
