"""The nccl-tests 2.17 text layout: one program's output, as its rank 0 prints it (pure functions).

Every format string is nccl-tests' own (src/util.cu of 2.17: writeDeviceReport,
writeResultHeader, writeBenchmarkLinePreamble / Body, writeResultFooter), so a parser of
real nccl-tests output reads these files unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracehouse.collectors.calibrate.results import OpTable, Placement, RankInfo, SizeRow
from tracehouse.collectors.calibrate.spec import OPS


@dataclass(frozen=True, kw_only=True)
class RunHeader:
    """The parameters nccl-tests prints above its table (its `# nThread` line)."""

    version: str  # what follows `# nccl-tests version `
    min_bytes: int
    max_bytes: int
    warmup: int
    iters: int
    validation: int = 1


def float_str(value: float, width: int) -> str:
    """A number in `width` characters, decimals as room allows (nccl-tests' getFloatStr)."""
    power, bound = 0, 1
    while value >= bound:  # digits before the point
        power += 1
        bound *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def rank_line(rank: RankInfo) -> str:
    """One `#  Rank` line of the `# Using devices` block."""
    return (
        f"#  Rank {rank.rank:2d} Group {rank.group:2d} Pid {rank.pid:6d} on {rank.host:>10s} "
        f"device {rank.device:2d} [{rank.bus_id}] {rank.name}"
    )


# writeResultHeader's columns: size, count, type, redop, root, then time, algbw, busbw, #wrong twice.
PARAMETER_WIDTHS = (10, 12, 8, 6, 6)
RESULT_WIDTHS = (7, 6, 6, 6)
PLACEMENTS_TITLE = "           out-of-place                       in-place          "


def _columns(cells: tuple[str, ...]) -> str:
    """One header line: '# ', the cells right-aligned two spaces apart, a trailing space."""
    widths = (*PARAMETER_WIDTHS, *RESULT_WIDTHS, *RESULT_WIDTHS)
    return "# " + "  ".join(f"{cell:>{width}s}" for cell, width in zip(cells, widths, strict=True)) + " "


def header_lines(program: str, header: RunHeader, ranks: tuple[RankInfo, ...]) -> list[str]:
    """From `# nccl-tests version` down to the units line of the table."""
    blank_parameters = "  ".join(" " * width for width in PARAMETER_WIDTHS)
    names = ("time", "algbw", "busbw", "#wrong")
    units = ("(us)", "(GB/s)", "(GB/s)", "")
    return [
        f"# nccl-tests version {header.version}",
        f"# Collective test starting: {program}",
        f"# nThread 1 nGpus 1 minBytes {header.min_bytes} maxBytes {header.max_bytes} step: 2(factor) "
        f"warmup iters: {header.warmup} iters: {header.iters} agg iters: 1 "
        f"validation: {header.validation} graph: 0",
        "#",
        "# Using devices",
        *(rank_line(rank) for rank in ranks),
        "#",
        f"# {blank_parameters}{PLACEMENTS_TITLE}",
        _columns(("size", "count", "type", "redop", "root", *names, *names)),
        _columns(("(B)", "(elements)", "", "", "", *units, *units)),
    ]


def placement_text(placement: Placement) -> str:
    """Time, algbw, busbw and #wrong of one placement."""
    time_s, alg, bus = (
        float_str(placement.time_us, 7),
        float_str(placement.algbw_gbps, 6),
        float_str(placement.busbw_gbps, 6),
    )
    wrong = "    N/A" if placement.wrong is None else f"  {float(placement.wrong):6g}"
    return f"  {time_s:>7s}  {alg:>6s}  {bus:>6s}{wrong}"


def row_line(row: SizeRow) -> str:
    """One size: its parameters, then out-of-place and in-place."""
    preamble = f"{row.size_bytes:12d}  {row.count:12d}  {row.dtype:>8s}  {row.redop:>6s}  {row.root:6d}"
    return preamble + placement_text(row.out_of_place) + placement_text(row.in_place)


def footer_lines(program: str, table: OpTable) -> list[str]:
    """From `# Out of bounds values` to `# Collective test concluded`."""
    errors = table.out_of_bounds
    return [
        f"# {'Out of bounds values':<20s} : {errors} {'FAILED' if errors else 'OK'}",
        f"# {'Avg bus bandwidth':<20s} : {table.avg_busbw_gbps:g} ",
        "#",
        f"# Collective test concluded: {program}",
    ]


def render(table: OpTable, ranks: tuple[RankInfo, ...], header: RunHeader) -> str:
    """The whole output of one nccl-tests program for one op's table."""
    program = OPS[table.op].program
    lines = [
        *header_lines(program, header, ranks),
        *(row_line(row) for row in table.rows),
        *footer_lines(program, table),
    ]
    return "\n".join(lines) + "\n"
