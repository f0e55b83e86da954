"""Read one nccl-tests output file into its tests and their points: `parse_nccl_tests(path)`.

Lines are read after the launcher's prefix (`[1,0]<stdout>:`, ` 0: `) is stripped; NCCL's own
log lines (`NCCL INFO`, `WARN`, `TRACE`), wherever they sit, are skipped. A file may hold
several tests: one starts at `# nccl-tests version`, `# Collective test starting:` or
`# nThread` once the current test has got that far, and at a column header once the current
test has rows or has ended (`# Avg bus bandwidth`).

Which program a test ran comes from its `# Collective test starting:` line, else the file's
name (`nccl_allreduce.log`), else from its bandwidths: only all_reduce has busbw > algbw.
Its ranks are the `# Rank N` lines; a file without them (a pasted table) gets n from
busbw / algbw, which nccl-tests computes with the factor f(n) of the op (2(n-1)/n for
all_reduce; (n-1)/n for all_gather, reduce_scatter, all_to_all, gather, scatter; the same
factors as the view collective_instances): n is the one integer whose f(n) fits the ratio of
the row with the largest algbw, both values within half a unit of their last printed place.
When several integers fit (large n), or the factor is 1 (broadcast, reduce, send_recv), n is
NULL, never a guess.

Every stored number is checked against `common.limits.NCCL_RANGES`: a result row whose size,
count, time, bandwidth or check leaves its range (negative, NaN, inf, beyond 2^48 bytes), and a
line inside a table that has a row's fields but no size in range (`-8`, `1e3`), is dropped and
counted (`NcclTestsResult.dropped`, the file's warnings at ingest).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tracehouse.pipeline.common.comm_names import op_name
from tracehouse.pipeline.common.errors import InputFileError
from tracehouse.pipeline.common.limits import INT32_MAX, NCCL_RANGES
from tracehouse.pipeline.parsers.nccl_tests import format as fmt
from tracehouse.pipeline.parsers.nccl_tests.result import NcclPoint, NcclTest, NcclTestsResult
from tracehouse.pipeline.parsers.nccl_tests.table import Columns, read_columns, read_row

# n from the ratio r = busbw / algbw, per op: the inverse of nccl-tests' bus bandwidth factor.
_RANKS_OF_RATIO: dict[str, Callable[[float], float]] = {
    "all_reduce": lambda r: 2 / (2 - r) if r < 2 else math.inf,
    **{
        op: (lambda r: 1 / (1 - r) if r < 1 else math.inf)
        for op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter")
    },
}
FAILURE_CHARS = 200  # of a test's failure message, kept for its one-line warning
_ROW_START = re.compile(r"\d+\Z", re.ASCII)
# A program named in a file name, with or without its underscores (nccl_allreduce.log); the
# longest spelling first, so reduce_scatter is not read as reduce.
_STEMS = {program: program.removesuffix(fmt.PROGRAM_SUFFIX) for program in fmt.PROGRAMS}
_SPELLINGS = sorted(
    {spelling: p for p, stem in _STEMS.items() for spelling in (stem, stem.replace("_", ""))}.items(),
    key=lambda item: -len(item[0]),
)
_PROGRAM_IN_NAME = re.compile("|".join(re.escape(spelling) for spelling, _ in _SPELLINGS))
_PROGRAM_OF_SPELLING = dict(_SPELLINGS)


@dataclass(kw_only=True)
class _Test:
    """One test while its lines are read."""

    tests_version: bool = False
    program: str | None = None
    header: bool = False
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)  # rank -> (host, device name)
    columns: Columns | None = None
    row_fields: int | None = None  # fields of the table's first row: every row has as many
    points: list[NcclPoint] = field(default_factory=list)
    avg_busbw_gbps: float | None = None
    ended: bool = False
    nccl_version: str | None = None
    failure: str | None = None

    @property
    def started(self) -> bool:
        return bool(
            self.tests_version or self.program or self.header or self.ranks or self.columns or self.failure
        )


@dataclass(kw_only=True)
class _Reader:
    """The tests read so far, and the first result-looking row that had no column header."""

    path: Path
    tests: list[_Test] = field(default_factory=list)
    current: _Test = field(default_factory=_Test)
    headless_row: int | None = None
    dropped: dict[str, int] = field(default_factory=dict)  # why result rows were dropped -> how many

    def next_test(self) -> _Test:
        if self.current.started:
            self.tests.append(self.current)
        self.current = _Test()
        return self.current

    def read(self, number: int, line: str) -> None:
        """Take one line (launcher prefix stripped)."""
        if fmt.NCCL_LOG.search(line):
            self._version(fmt.NCCL_VERSION.search(line))
        elif line.startswith("#"):
            self._comment(number, line)
        elif (version := fmt.NCCL_VERSION.search(line)) is not None:
            self._version(version)
        elif failure := fmt.FAILURE.search(line):
            message = fmt.FAILURE_MESSAGE.search(line, failure.end())
            text = message.group(1).strip(" /") if message else line[failure.start() :]
            self.current.failure = self.current.failure or text[:FAILURE_CHARS]
        elif (fields := line.split()) and _ROW_START.match(fields[0]):
            self._row(number, fields)
        elif fields and self._row_shaped(fields):
            self._drop(f"size {fields[0][:20]!r} is not a byte count")

    def _comment(self, number: int, line: str) -> None:
        test = self.current
        if match := fmt.TESTS_VERSION.match(line):
            test = self.next_test() if test.started else test
            test.tests_version = True
            if match.group(2) and test.nccl_version is None:
                test.nccl_version = fmt.nccl_library_version(match.group(2))
        elif match := fmt.STARTING.match(line):
            if test.program or test.header or test.columns or test.ended:
                test = self.next_test()
            test.program = match.group(1).rsplit("/", 1)[-1]
        elif fmt.RUN_HEADER.match(line):
            if test.header or test.columns or test.ended:
                test = self.next_test()
            test.header = True
        elif match := fmt.RANK_LINE.match(line):
            if len(match["rank"]) > 9:
                raise InputFileError(self.path, f"line {number}: rank {match['rank'][:20]}... is not a rank")
            test.ranks[int(match["rank"])] = (match["host"], match["device"].rstrip())
        elif fmt.COLUMN_HEADER.match(line):
            if test.points or test.ended:
                test = self.next_test()
            test.columns = read_columns(self.path, number, line)
        elif match := fmt.AVG_BUSBW.match(line):
            test.avg_busbw_gbps = _float_or_none(match.group(1))
            low, high = NCCL_RANGES["busbw_gbps"]
            if test.avg_busbw_gbps is not None and not low <= test.avg_busbw_gbps <= high:
                raise InputFileError(
                    self.path, f"line {number}: average bus bandwidth {match.group(1)[:40]!r} is out of range"
                )
            test.ended = True
        elif fmt.CONCLUDED.match(line):
            test.ended = True

    def _version(self, match: re.Match[str] | None) -> None:
        if match is not None and self.current.nccl_version is None:
            self.current.nccl_version = match.group(1)

    def _row(self, number: int, fields: list[str]) -> None:
        test = self.current
        if test.columns is None or test.ended:
            self.headless_row = self.headless_row or number
            return
        if test.row_fields is not None and len(fields) != test.row_fields:
            raise InputFileError(
                self.path,
                f"line {number}: a result row of {len(fields)} fields where the rows above it have "
                f"{test.row_fields}",
            )
        points = read_row(self.path, number, fields, test.columns)
        test.row_fields = len(fields)
        problem = next(filter(None, map(_out_of_range, points)), None)
        if problem is not None:
            self._drop(problem)
            return
        test.points.extend(points)

    def _row_shaped(self, fields: list[str]) -> bool:
        """Whether a line inside a table has a result row's number of fields (its size is then bad)."""
        test = self.current
        if test.columns is None or test.ended:
            return False
        widths = {test.row_fields} if test.row_fields else {test.columns.width, test.columns.width - 1}
        return len(fields) in widths

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1


def parse_nccl_tests(path: str | Path) -> NcclTestsResult:
    """Every test of one nccl-tests output file; InputFileError when it holds no result table."""
    path = Path(path)
    reader = _Reader(path=path)
    for number, raw in enumerate(_read_text(path).split("\n"), start=1):
        reader.read(number, fmt.strip_launcher_prefix(raw.rstrip("\r")).strip())
    reader.next_test()
    if not any(test.points for test in reader.tests):
        raise InputFileError(path, _no_table_reason(reader))
    file_version = next((t.nccl_version for t in reader.tests if t.nccl_version), None)
    return NcclTestsResult(
        path=str(path),
        tests=tuple(_finish(path, test, file_version) for test in reader.tests),
        dropped=tuple(reader.dropped.items()),
    )


def _out_of_range(point: NcclPoint) -> str | None:
    """Why a point cannot be stored (a value outside NCCL_RANGES), or None."""
    for name, (low, high) in NCCL_RANGES.items():
        value = getattr(point, name)
        if value is not None and not low <= value <= high:  # NaN fails too
            return f"{name} outside [{low:g}, {high:g}]"
    if point.root is not None and not 0 <= point.root <= INT32_MAX:
        return "root outside int32"
    return None


def _finish(path: Path, test: _Test, file_version: str | None) -> NcclTest:
    """The frozen test: its program, op and ranks decided."""
    program, program_from = _program(path, test)
    op = op_name(program.removesuffix(fmt.PROGRAM_SUFFIX)) if program else None
    ranks, ranks_from = (len(test.ranks), "rank lines") if test.ranks else _derived_ranks(op, test.points)
    in_order = [test.ranks[r] for r in sorted(test.ranks)]
    return NcclTest(
        program=program,
        program_from=program_from,
        op=op,
        ranks=ranks,
        ranks_from=ranks_from,
        hosts=tuple(host for host, _ in in_order),
        devices=tuple(device for _, device in in_order),
        nccl_version=test.nccl_version or file_version,
        avg_busbw_gbps=test.avg_busbw_gbps,
        failure=test.failure,
        points=tuple(test.points),
    )


def _program(path: Path, test: _Test) -> tuple[str | None, str | None]:
    """Which nccl-tests program the test ran, and what said so."""
    if test.program:
        return test.program, "header"
    if match := _PROGRAM_IN_NAME.search(path.name.lower()):
        return _PROGRAM_OF_SPELLING[match.group(0)], "file name"
    if any(
        p.busbw_gbps - fmt.bw_half_unit(p.busbw_gbps) > p.algbw_gbps + fmt.bw_half_unit(p.algbw_gbps)
        for p in test.points
    ):
        return "all_reduce_perf", "busbw/algbw"
    if not test.points:
        return None, None
    raise InputFileError(
        path,
        "cannot tell which nccl-tests program wrote it: no '# Collective test starting:' line, no "
        "program in the file name (e.g. all_reduce_perf.txt), and its busbw/algbw fits several collectives",
    )


def derived_ranks(op: str | None, points: tuple[NcclPoint, ...] | list[NcclPoint]) -> int | None:
    """n from busbw / algbw of the row with the largest algbw (module docstring); None when undecided."""
    ranks_of = _RANKS_OF_RATIO.get(op or "")
    widest = max(points, key=lambda p: p.algbw_gbps, default=None)
    if ranks_of is None or widest is None:
        return None
    alg, bus = widest.algbw_gbps, widest.busbw_gbps
    alg_half, bus_half = fmt.bw_half_unit(alg), fmt.bw_half_unit(bus)
    if alg <= alg_half:
        return None
    low = ranks_of(max(bus - bus_half, 0.0) / (alg + alg_half))
    high = ranks_of((bus + bus_half) / (alg - alg_half))
    if math.isinf(high):
        return None
    fitting = range(max(1, math.ceil(low - 1e-9)), math.floor(high + 1e-9) + 1)
    return fitting[0] if len(fitting) == 1 and fitting[0] <= INT32_MAX else None


def _derived_ranks(op: str | None, points: list[NcclPoint]) -> tuple[int | None, str | None]:
    ranks = derived_ranks(op, points)
    return ranks, None if ranks is None else "busbw/algbw"


def _no_table_reason(reader: _Reader) -> str:
    """Why a file holds no result table, as specific as its lines allow."""
    failure = next((t.failure for t in reader.tests if t.failure), None)
    if failure is not None:
        return f"no result table (the test failed: {failure!r})"
    if reader.headless_row is not None:
        return (
            f"no result table: line {reader.headless_row} looks like a result row but no column "
            "header (# size count type ... time algbw busbw) comes before it"
        )
    return "no result table (no '# size count type ... time algbw busbw' header followed by rows)"


def _float_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _read_text(path: Path) -> str:
    """The file's text; a stray non-UTF-8 byte (in a log line) becomes U+FFFD."""
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror or exc}") from exc
