"""One nccl-tests result table: its column header, and each row read into two points.

Column sets (MANIFEST.md): `size count type [redop] [root] time algbw busbw CHECK` then the
in-place `time algbw busbw CHECK`, where CHECK is `error` (old layouts: a float or N/A) or
`#wrong` (newer ones: an integer or N/A). Old layouts carry redop, root or neither and leave
redop blank for ops that do not reduce (alltoall); newer ones always print both (`none`, `-1`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracehouse.pipeline.common.comm_names import dtype_name
from tracehouse.pipeline.common.errors import InputFileError
from tracehouse.pipeline.parsers.nccl_tests.format import NOT_AVAILABLE
from tracehouse.pipeline.parsers.nccl_tests.result import NcclPoint

LEADING = ("size", "count", "type")
OPTIONAL = ("redop", "root")
MEASURED = ("time", "algbw", "busbw")
CHECKS = ("error", "#wrong")
HALF = len(MEASURED) + 1  # fields per placement: time, algbw, busbw and the check
NO_REDOP = "none"
NO_ROOT = -1


@dataclass(frozen=True, kw_only=True)
class Columns:
    """The column set a header line announces."""

    optional: tuple[str, ...]  # redop and/or root, in header order
    check: str  # error | #wrong

    @property
    def width(self) -> int:
        """Fields in a full row."""
        return len(LEADING) + len(self.optional) + 2 * HALF


def read_columns(path: Path, number: int, line: str) -> Columns:
    """The column set of a header line (`#  size  count  type ... time  algbw  busbw ...`)."""
    names = line.lstrip("#").split()
    optional = tuple(names[len(LEADING) : -2 * HALF])
    tail = names[-2 * HALF :]
    known = (
        len(names) >= len(LEADING) + 2 * HALF
        and tuple(names[: len(LEADING)]) == LEADING
        and tuple(tail[: len(MEASURED)]) == MEASURED == tuple(tail[HALF : HALF + len(MEASURED)])
        and tail[len(MEASURED)] == tail[-1] in CHECKS
        and set(optional) <= set(OPTIONAL)
        and len(set(optional)) == len(optional)
    )
    if not known:
        raise InputFileError(
            path, f"line {number}: a column header tracehouse does not know: {' '.join(names)[:120]}"
        )
    return Columns(optional=optional, check=tail[-1])


def read_row(path: Path, number: int, fields: list[str], columns: Columns) -> tuple[NcclPoint, NcclPoint]:
    """The out-of-place and in-place points of one result row (split into fields)."""
    optional = fields[len(LEADING) : -2 * HALF]
    if len(fields) == columns.width:
        cells = dict(zip(columns.optional, optional, strict=True))
    elif len(fields) == columns.width - 1 and "redop" in columns.optional:
        present = [c for c in columns.optional if c != "redop"]  # redop left blank
        cells = dict(zip(present, optional, strict=True))
    else:
        raise InputFileError(
            path, f"line {number}: a result row of {len(fields)} fields where the header has {columns.width}"
        )
    shared = {
        "line": number,
        "bytes": _integer(path, number, "size", fields[0]),
        "count": _integer(path, number, "count", fields[1]),
        "dtype": dtype_name(fields[2]),
        "redop": None if cells.get("redop", NO_REDOP) == NO_REDOP else cells["redop"],
        "root": _root(path, number, cells.get("root")),
    }
    start = len(fields) - 2 * HALF
    out_of_place = _measured(path, number, fields[start : start + HALF], columns.check)
    in_place = _measured(path, number, fields[start + HALF :], columns.check)
    return NcclPoint(**shared, in_place=False, **out_of_place), NcclPoint(**shared, in_place=True, **in_place)


def _measured(path: Path, number: int, cells: list[str], check: str) -> dict:
    time_text, algbw_text, busbw_text, check_text = cells
    checked = None if check_text == NOT_AVAILABLE else check_text
    return {
        "time_us": _number(path, number, "time", time_text),
        "algbw_gbps": _number(path, number, "algbw", algbw_text),
        "busbw_gbps": _number(path, number, "busbw", busbw_text),
        "wrong": _count(path, number, checked) if check == "#wrong" and checked else None,
        "error": _number(path, number, "error", checked) if check == "error" and checked else None,
    }


def _root(path: Path, number: int, text: str | None) -> int | None:
    root = None if text is None else _integer(path, number, "root", text)
    return None if root == NO_ROOT else root


def _integer(path: Path, number: int, column: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputFileError(path, f"line {number}: {column} {text[:40]!r} is not an integer") from None


def _count(path: Path, number: int, text: str) -> int:
    """#wrong: an integer, printed with %g by 2.17 (`1.23457e+07` once it is large)."""
    value = _number(path, number, "#wrong", text)
    if not value.is_integer() or value < 0:
        raise InputFileError(path, f"line {number}: #wrong {text[:40]!r} is not a count")
    return int(value)


def _number(path: Path, number: int, column: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputFileError(path, f"line {number}: {column} {text[:40]!r} is not a number") from None
