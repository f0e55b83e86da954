"""What the lines of NVIDIA nccl-tests output look like, defined once (the sniffer and the parser read it).

Standard library only: discovery imports it to recognise these files among the others of a run
folder. The layouts seen (old and new column sets, launcher prefixes, interleaved NCCL INFO
lines) are described in ../shared/data/nccl-tests/MANIFEST.md.
"""

from __future__ import annotations

import re

# The nccl-tests programs (the binaries' names); each one measures the collective of its stem.
PROGRAMS = (
    "all_reduce_perf",
    "all_gather_perf",
    "alltoall_perf",
    "broadcast_perf",
    "gather_perf",
    "hypercube_perf",
    "reduce_perf",
    "reduce_scatter_perf",
    "scatter_perf",
    "sendrecv_perf",
)
PROGRAM_SUFFIX = "_perf"

# How many leading bytes of a .txt / .log / .out file decide whether it is nccl-tests output: a
# launcher may print a few lines (or a job banner) before the `# nThread` header.
SNIFF_BYTES = 4096
SNIFF_SUFFIXES = (".txt", ".log", ".out")

# Prefixes a launcher puts before every line: Open MPI's `--tag-output` (`[1,0]<stdout>:`) and
# `srun -l` (` 0: `, the task number right-aligned).
LAUNCHER_PREFIXES = (
    re.compile(r"\[\d+,\d+\]<(?:stdout|stderr)>:"),
    re.compile(r" *\d+: "),
)

# `# nThread 1 nGpus 8 minBytes 1 maxBytes 8589934592 step: 2(factor) warmup iters: 5 ...`
RUN_HEADER = re.compile(r"#\s*nThread\s+\d+\s+nGpus\s+\d+\s+minBytes\s+\d+")
# `# nccl-tests version 2.17.6 nccl-headers=22807 nccl-library=22807` (2.17 and later)
TESTS_VERSION = re.compile(r"#\s*nccl-tests version\s+(\S+)(?:.*?\bnccl-library=(\d{1,9})(?!\d))?")
STARTING = re.compile(r"#\s*Collective test starting:\s*(\S+)")
CONCLUDED = re.compile(r"#\s*Collective test concluded:")
# `#   Rank  0 Pid 112424 on localhost device  0 [0x00] A100-SXM4-40GB` (old), or
# `#  Rank  0 Group  0 Pid 338393 on cnode2-001 device  0 [0000:1b:00] NVIDIA H100 80GB HBM3`
RANK_LINE = re.compile(
    r"#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+"
    r"device\s+\d+\s+\[[^\]]*\]\s*(?P<device>.*)$"  # device: strip it (a lazy .*? is quadratic)
)
# `#       size         count      type   redop    root     time   algbw   busbw #wrong ...`
COLUMN_HEADER = re.compile(r"#\s*size\s+count\s+type\b.*\btime\s+algbw\s+busbw\b")
AVG_BUSBW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\S+)")
# Printed by NCCL itself at init, alone or inside an INFO line: `NCCL version 2.12.7+cuda11.4`.
NCCL_VERSION = re.compile(r"\bNCCL version\s+(\d+(?:\.\d+)+)")
# `cnode2-002: Test NCCL failure common.cu:1279 'remote process exited or there was a network error / '`
FAILURE = re.compile(r"\bTest (?:NCCL |CUDA )?failure\b")
FAILURE_MESSAGE = re.compile(r"'([^']*)'")
# Lines NCCL's own logging interleaves with the table (NCCL_DEBUG=INFO / WARN / TRACE).
NCCL_LOG = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b")

# Result cells: `N/A` where a value was not checked (in-place #wrong, error without validation).
NOT_AVAILABLE = "N/A"
# How far a printed bandwidth may be from the true one: half a unit of its last place. Older
# nccl-tests print two decimals always; 2.17 prints fewer as the value grows (getFloatStr in a
# 6-wide cell: 2 decimals below 1000, 1 below 10^4, none below 10^6, then 1.2e+06). These bounds
# hold for both, so an interval built from them always holds the true value.
BW_HALF_UNITS = ((1e3, 0.005), (1e4, 0.05), (1e6, 0.5))
BW_HALF_UNIT_BEYOND = 0.05  # relative, for the exponent form


def bw_half_unit(value: float) -> float:
    """Half a unit of the last place a bandwidth of this size is printed with (at most)."""
    for bound, half in BW_HALF_UNITS:
        if value < bound:
            return half
    return value * BW_HALF_UNIT_BEYOND


def strip_launcher_prefix(line: str) -> str:
    """The line without the prefixes a launcher (mpirun --tag-output, srun -l) put before it."""
    stripped = True
    while stripped:
        stripped = False
        for prefix in LAUNCHER_PREFIXES:
            match = prefix.match(line)
            if match:
                line, stripped = line[match.end() :], True
    return line


def looks_like_nccl_tests(head: str) -> bool:
    """Whether a file's first SNIFF_BYTES (as text) show nccl-tests output."""
    return any(pattern.search(head) for pattern in (RUN_HEADER, COLUMN_HEADER, TESTS_VERSION, STARTING))


def nccl_library_version(code: str) -> str:
    """NCCL's version from its NCCL_VERSION_CODE: `22807` -> `2.28.7`.

    NCCL's nccl.h: major*10000 + minor*100 + patch since 2.9, major*1000 + minor*100 + patch before.
    """
    number = int(code)
    major = number // 10000 if number >= 10000 else number // 1000
    return f"{major}.{number // 100 % 100}.{number % 100}"
