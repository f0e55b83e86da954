"""Parse `nvidia-smi --query-gpu=... --format=csv` logs: tracehouse's own, third-party and wrappers'.

nvidia-smi's `timestamp` is host LOCAL time `YYYY/MM/DD HH:MM:SS.mmm`. tracehouse's sampler
records the capturing host's UTC offset in its header line; for files without one the
parsing machine's local zone is assumed and `clock` says so. ISO-8601 timestamps that carry
an offset (wrapper scripts) are exact.
"""

from __future__ import annotations

import calendar
import csv
import re
import time
from datetime import datetime
from pathlib import Path

import polars as pl
from tracehouse.pipeline.common.errors import PowerLogError
from tracehouse.pipeline.common.gpu_identity import VISIBLE_FACT
from tracehouse.pipeline.parsers.power.common import as_cuda_ordinals, samples_frame

LOCAL_FORMAT = "%Y/%m/%d %H:%M:%S.%f"
# query-gpu field -> POWER_SAMPLES column (units as nvidia-smi reports them: W, C, %, MiB).
VALUE_FIELDS = {
    "power.draw": "power_w",
    "temperature.gpu": "temperature_c",
    "utilization.gpu": "gpu_util_pct",
    "memory.used": "mem_used_mib",
}
UTC_OFFSET = re.compile(r"[+-]?[0-9]{1,6}")
DAY_S = 86_400
BUNDLE_SECTION = re.compile(r"^# \w+ :: query-gpu \(csv")


def header_names(row: list[str]) -> list[str]:
    """Column names with their bracketed units removed."""
    return [without_unit(cell.strip()) for cell in row]


def without_unit(name: str) -> str:
    """ "power.draw [W]" -> "power.draw" (by hand: a regex would be quadratic on a long cell)."""
    start = name.rfind("[")
    if name.endswith("]") and start >= 0 and "]" not in name[start:-1]:
        return name[:start].rstrip()
    return name


def is_query_gpu_header(line: str) -> bool:
    """True for a `--query-gpu` CSV header line that has what a power sample needs."""
    return has_sample_columns(header_names(line.split(",")))


def has_sample_columns(names: list[str]) -> bool:
    """Whether column names hold what a power sample needs: timestamp, a device and power.draw."""
    return "power.draw" in names and ("index" in names or "gpu" in names) and "timestamp" in names


def parse_cell(path: Path, number: int, cell: str) -> float | None:
    """A numeric cell such as `631.95 W`, `100 %` or `74.01`; None for [N/A] and the like."""
    text = cell.strip()
    if not text or text.startswith("[") or text == "N/A":
        return None
    try:
        return float(text.split()[0])
    except ValueError:
        raise PowerLogError(path, f"line {number}: {cell.strip()[:40]!r} is not a number") from None


class TimestampReader:
    """Turns nvidia-smi or ISO-8601 timestamp text into epoch ns, and names the clock used."""

    def __init__(self, path: Path, utc_offset_s: int | None) -> None:
        self.path = path
        self.utc_offset_s = utc_offset_s
        self.clocks: set[str] = set()

    def __call__(self, number: int, text: str) -> int:
        """Epoch nanoseconds of one timestamp cell; PowerLogError for a date the clock cannot place."""
        try:
            return self.read(number, text.strip())
        except (OverflowError, OSError, ValueError):  # year 1 in the local zone, and the like
            raise PowerLogError(
                self.path, f"line {number}: timestamp {text.strip()[:40]!r} is out of range"
            ) from None

    def read(self, number: int, text: str) -> int:
        """Epoch nanoseconds of one stripped timestamp cell."""
        try:
            local = datetime.strptime(text, LOCAL_FORMAT)
        except ValueError:
            return self.iso(number, text)
        micros = local.microsecond * 1000
        whole = local.replace(microsecond=0)
        if self.utc_offset_s is not None:
            self.clocks.add("nvidia-smi-localtime")
            return (calendar.timegm(whole.timetuple()) - self.utc_offset_s) * 1_000_000_000 + micros
        seconds = int(whole.timestamp())  # mktime: the parsing machine's local zone, DST-aware
        self.clocks.add(f"nvidia-smi-localtime-assumed-{time.localtime(seconds).tm_zone}")
        return seconds * 1_000_000_000 + micros

    def iso(self, number: int, text: str) -> int:
        """An ISO-8601 timestamp; one without an offset is read in the local zone."""
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise PowerLogError(
                self.path, f"line {number}: timestamp {text[:40]!r} is not a known format"
            ) from None
        if moment.tzinfo is None:
            self.clocks.add("iso8601-localtime-assumed")
            moment = moment.astimezone()
        else:
            self.clocks.add("iso8601")
        whole = moment.replace(microsecond=0)
        return calendar.timegm(whole.utctimetuple()) * 1_000_000_000 + moment.microsecond * 1000


def csv_sections(text: str) -> list[list[tuple[int, str]]]:
    """The query-gpu CSV parts of a file as (line number, line) lists.

    A plain log is one section; an nvidia_gpu_exporter capture bundle holds one per phase.
    """
    lines = list(enumerate(text.splitlines(), start=1))
    if not any(BUNDLE_SECTION.match(line) for _, line in lines):
        return [[(n, line) for n, line in lines if line.strip() and not line.startswith("#")]]
    sections: list[list[tuple[int, str]]] = []
    state = "outside"  # outside -> title (between the #### rules) -> body
    for number, line in lines:
        if BUNDLE_SECTION.match(line):
            state, current = "title", []
            sections.append(current)
        elif line.startswith("####"):
            state = "body" if state == "title" else "outside"
        elif state == "body" and line.strip():
            current.append((number, line))
    return sections


def parse_nvidia_smi_log(
    path: Path, text: str, facts: dict[str, str], *, host: str | None, stamped: bool = False
) -> pl.DataFrame:
    """POWER_SAMPLES rows from nvidia-smi query-gpu CSV text (tracehouse header facts if any)."""
    offset = facts.get("utc_offset_s")
    if offset is not None and not (UTC_OFFSET.fullmatch(offset) and abs(int(offset)) <= DAY_S):
        raise PowerLogError(path, f"utc_offset_s {offset[:40]!r} is not a number of seconds within a day")
    reader = TimestampReader(path, int(offset) if offset is not None else None)
    columns: dict[str, list] = {
        "ts_unix_ns": [],
        "device": [],
        "host": [],
        **{c: [] for c in VALUE_FIELDS.values()},
    }
    identities: list[tuple[str, str]] = []  # (uuid, pci.bus_id) of each row, "" where not logged
    for section in csv_sections(text):
        rows = [(n, line.partition("\t")[2] if stamped else line) for n, line in section]
        read_section(path, rows, reader, columns, facts.get("host"), identities)
    if not columns["ts_unix_ns"]:
        raise PowerLogError(path, "nvidia-smi log has a header but no sample rows")
    if VISIBLE_FACT in facts:
        columns = as_cuda_ordinals(path, columns, identities, facts[VISIBLE_FACT])
    clock = ",".join(sorted(reader.clocks))
    return samples_frame(path, columns, host=host, source="nvidia-smi", clock=clock)


def read_section(
    path: Path,
    rows: list[tuple[int, str]],
    reader: TimestampReader,
    columns: dict[str, list],
    file_host: str | None,
    identities: list[tuple[str, str]],
) -> None:
    """Append the samples of one CSV section (header line first) to columns, the GPUs' identities
    to identities."""
    if not rows or not is_query_gpu_header(rows[0][1]):
        first = rows[0][0] if rows else 1
        raise PowerLogError(
            path, f"line {first}: expected a query-gpu header with timestamp, index, power.draw"
        )
    names, device_name = read_header(path, *rows[0])
    for number, line in rows[1:]:
        if is_query_gpu_header(line):
            names, device_name = read_header(path, number, line)  # a restarted nvidia-smi repeats its header
            continue
        values = csv_fields(path, number, line, skipinitialspace=True)
        if len(values) != len(names):
            raise PowerLogError(
                path, f"line {number}: {len(values)} fields for {len(names)} columns (truncated?)"
            )
        cells = dict(zip(names, values, strict=True))
        device = parse_cell(path, number, cells[device_name])
        if device is None:
            raise PowerLogError(path, f"line {number}: no GPU index")
        if not (device.is_integer() and device >= 0):  # also NaN and inf
            raise PowerLogError(
                path, f"line {number}: GPU index {cells[device_name].strip()[:40]!r} is not one"
            )
        columns["ts_unix_ns"].append(reader(number, cells["timestamp"]))
        columns["device"].append(int(device))
        columns["host"].append(host_cell(cells.get("hostname")) or file_host)
        identities.append((cells.get("uuid", "").strip(), cells.get("pci.bus_id", "").strip()))
        for field, column in VALUE_FIELDS.items():
            columns[column].append(parse_cell(path, number, cells[field]) if field in cells else None)


def read_header(path: Path, number: int, line: str) -> tuple[list[str], str]:
    """A header line's column names and the one naming the device (wrapper scripts number GPUs in `gpu`)."""
    names = header_names(csv_fields(path, number, line))
    if not has_sample_columns(names):  # a quoted cell may hide a name from the quick check
        raise PowerLogError(
            path, f"line {number}: expected a query-gpu header with timestamp, index, power.draw"
        )
    return names, "gpu" if "gpu" in names else "index"


def csv_fields(path: Path, number: int, line: str, *, skipinitialspace: bool = False) -> list[str]:
    """The cells of one CSV line, or PowerLogError naming the line (a cell over the csv module's limit)."""
    try:
        return next(csv.reader([line], skipinitialspace=skipinitialspace), [])
    except csv.Error as exc:
        raise PowerLogError(path, f"line {number}: not a CSV row ({exc})") from None


def host_cell(cell: str | None) -> str | None:
    """The `hostname` cell, None when absent or bracketed ([N/A])."""
    if cell is None or not cell.strip() or cell.strip().startswith("["):
        return None
    return cell.strip()
