"""Every numeric limit an input is held to, decided once here: traces, manifests, power logs, nccl-tests.

Standard library only: the collectors share `pipeline/common`. A value outside its limit is a
file error (`InputFileError` naming the file, the field and the value), or, in a format of
independent rows (power samples, a table of message sizes), the row is dropped and the count of
dropped rows is reported as a warning of the file (summary and `ingest_errors`).

Traces (`pipeline/parsers/kineto/limits.py` explains each and holds the checks):

* MAX_DEPTH: JSON nesting; MAX_TIME_US: |ts| and |dur| below 2^53 µs; MAX_INT_CHARS: the
  longest integer literal; INT32/INT64 bounds: the warehouse's INTEGER and BIGINT columns.

Manifests (`pipeline/common/manifest.py`):

* MANIFEST_MAX_BYTES: a manifest is small; a larger file is refused before it is parsed.
* MANIFEST_MAX_DEPTH: arrays and objects nested at most this deep (a manifest nests 3 deep).
* Every number in a manifest is finite and every integer within int64, wherever it stands
  (`model_config` too); NaN and Infinity literals are refused.
* MANIFEST_BOUNDS: each numeric run fact is positive and below its bound, so that every product
  the views compute (tokens_per_step * flops_per_token, peak_flops * world_size, MFU) stays far
  inside float64 and JSON.

Power samples (`pipeline/parsers/power`): a sample whose time or value leaves its range is
dropped and counted (POWER_RANGES); a time or device index that cannot be stored at all (beyond
int64 ns or int32) fails the file. nccl-tests (`pipeline/parsers/nccl_tests`): a result row whose
size, time or bandwidth leaves its range is dropped and counted (NCCL_RANGES).
"""

from __future__ import annotations

MAX_DEPTH = 512
MAX_TIME_US = 2**53
MAX_INT_CHARS = 4300  # msgspec's own limit on an integer literal, sign included
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

MANIFEST_MAX_BYTES = 1 << 20
MANIFEST_MAX_DEPTH = 16
# Run fact -> exclusive upper bound (every one must also be positive).
MANIFEST_BOUNDS: dict[str, int | float] = {
    "n_params": 2**50,  # about 10^15 parameters
    "fsdp_units": 2**50,  # parameters of one FSDP unit
    "flops_per_token": 1e15,  # FLOP; a 10^15-parameter model needs 6e15: beyond any real one
    "global_batch": 2**32,  # sequences per step
    "seq_len": 2**32,  # tokens per sequence
    "tokens_per_step": 2**40,  # about 10^12 tokens per step
    "peak_flops": 1e18,  # FLOP/s per device (an H200 gives about 2e15 at fp8)
    "interval_ms": 2**31,  # power sampling interval
    # stored as INTEGER: dp, tp, pp, world_size, nodes, devices_per_node, node_devices, manifest_version
}
MANIFEST_INT32_BOUND = 2**31

# POWER_SAMPLES column -> inclusive (low, high). ts_unix_ns: 1970 up to int64's end (2262).
POWER_RANGES: dict[str, tuple[float, float]] = {
    "ts_unix_ns": (0, INT64_MAX),
    "device": (0, INT32_MAX),
    "power_w": (0.0, 5000.0),  # one device; the largest boards draw about 1,200 W
    "energy_counter_j": (0.0, INT64_MAX / 1000),  # an int64 mJ counter
    "temperature_c": (0.0, 500.0),
    "gpu_util_pct": (0.0, 100.0),
    "mem_used_mib": (0.0, float(2**30)),  # 1 PiB
}

# nccl-tests point column -> inclusive (low, high).
NCCL_RANGES: dict[str, tuple[float, float]] = {
    "bytes": (0, 2**48),  # 256 TiB per message
    "count": (0, 2**48),
    "time_us": (0.0, float(MAX_TIME_US)),
    "algbw_gbps": (0.0, 1e9),
    "busbw_gbps": (0.0, 1e9),
    "wrong": (0, INT64_MAX),
    "error": (0.0, 1e300),
}
