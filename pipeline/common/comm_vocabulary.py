"""The communication vocabulary: which event names are collective kernels, host comm ops, gloo spans.

Defined here once (standard library only: the collectors import it inside every training rank):

* the parser classifies names with `is_comm_kernel`, `is_host_comm_op`, `is_comm_span` and
  `is_label`;
* the SQL reads the same patterns from the table `comm_vocabulary`, which the warehouse fills
  from `seed_rows()` whenever it creates it (`sql/seeds/comm_vocabulary.sql`); gpu_events,
  cpu_calls and device_intervals join it instead of naming patterns. The user's own kernel
  patterns (`comm_kernel_patterns`) extend the kernel ones.

METHODOLOGY "Device activity on a GPU trace": communication kernels, case-insensitive, are
names starting with nccl, rccl or hccl, or containing ncclKernel or ncclDevKernel.
"Steps on a CPU-only trace": communication ops, case-sensitive, are names starting with
`c10d::`, `_c10d_functional::`, `gloo:` or `nccl:`, and `record_param_comms` itself;
communication spans are the `gloo:*` events.
"""

from __future__ import annotations

# Matched against the lowercased name (case-insensitive), so spelled in lower case.
KERNEL_PREFIXES = ("nccl", "rccl", "hccl")
KERNEL_SUBSTRINGS = ("ncclkernel", "nccldevkernel")

C10D_OP_PREFIX = "c10d::"
FUNCTIONAL_OP_PREFIX = "_c10d_functional::"
GLOO_SPAN_PREFIX = "gloo:"
NCCL_ANNOTATION_PREFIX = "nccl:"
RECORD_PARAM_COMMS = "record_param_comms"
HOST_OP_PREFIXES = (C10D_OP_PREFIX, FUNCTIONAL_OP_PREFIX, GLOO_SPAN_PREFIX, NCCL_ANNOTATION_PREFIX)
HOST_OP_NAMES = (RECORD_PARAM_COMMS,)
# The spans that are communication on a CPU-only rank (and stay out of its call tree).
COMM_SPAN_PREFIXES = (GLOO_SPAN_PREFIX,)

# A tracehouse collective label (`comm_label`): this prefix, then `|key=value` fields.
LABEL_PREFIX = "tracehouse.collective"
LABEL_START = LABEL_PREFIX + "|"

# Stripped (lowercased, repeatedly) from an op name before its alias is looked up (comm_names.op_name).
OP_NAME_PREFIXES = (NCCL_ANNOTATION_PREFIX, "rccl:", GLOO_SPAN_PREFIX, C10D_OP_PREFIX, FUNCTIONAL_OP_PREFIX)

# Kinds of the rows of the SQL table comm_vocabulary, and how each is matched there.
KERNEL_PREFIX = "kernel_prefix"  # starts_with(lower(name), pattern)
KERNEL_SUBSTRING = "kernel_substring"  # contains(lower(name), pattern)
HOST_OP_PREFIX = "host_op_prefix"  # starts_with(name, pattern)
HOST_OP_NAME = "host_op_name"  # name = pattern
COMM_SPAN_PREFIX = "comm_span_prefix"  # starts_with(name, pattern)


def _shared_part(patterns: tuple[str, ...]) -> str:
    """The longest string every pattern contains ("ccl"): most names lack it, so need no other test."""
    shortest = min(patterns, key=len)
    for size in range(len(shortest), 0, -1):
        for start in range(len(shortest) - size + 1):
            part = shortest[start : start + size]
            if all(part in p for p in patterns):
                return part
    return ""


_KERNEL_SHARED = _shared_part(KERNEL_PREFIXES + KERNEL_SUBSTRINGS)


def is_comm_kernel(name: str | None) -> bool:
    """Whether a GPU kernel name is a communication (NCCL/RCCL/HCCL) kernel."""
    if name is None:
        return False
    lower = name.lower()
    return _KERNEL_SHARED in lower and (
        lower.startswith(KERNEL_PREFIXES) or any(part in lower for part in KERNEL_SUBSTRINGS)
    )


def is_host_comm_op(name: str | None) -> bool:
    """Whether a host op is a communication op (so its self time is not compute on a CPU rank)."""
    return name is not None and (name.startswith(HOST_OP_PREFIXES) or name in HOST_OP_NAMES)


def is_comm_span(name: str | None) -> bool:
    """Whether an event is a communication span of a CPU-only rank (`gloo:*`)."""
    return name is not None and name.startswith(COMM_SPAN_PREFIXES)


def is_label(name: str | None) -> bool:
    """Whether an event is a tracehouse collective label span."""
    return name is not None and name.startswith(LABEL_START)


def seed_rows() -> list[tuple[str, str]]:
    """(kind, pattern) rows of the SQL table comm_vocabulary, sorted."""
    kinds = (
        (KERNEL_PREFIX, KERNEL_PREFIXES),
        (KERNEL_SUBSTRING, KERNEL_SUBSTRINGS),
        (HOST_OP_PREFIX, HOST_OP_PREFIXES),
        (HOST_OP_NAME, HOST_OP_NAMES),
        (COMM_SPAN_PREFIX, COMM_SPAN_PREFIXES),
    )
    return sorted((kind, pattern) for kind, patterns in kinds for pattern in patterns)
