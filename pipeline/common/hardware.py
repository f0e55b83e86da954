"""Peak dense FLOP/s per device and dtype (the denominator of MFU), peak memory bandwidth and
memory per device, and the roofline bound they set for an op of a given arithmetic intensity.

Imports no torch (the report prints this table). Values are the vendors' datasheet numbers
for dense math (no 2:4 sparsity), per device; SXM/OAM parts unless the name says otherwise.
A CPU, or any device not listed, has no peak: MFU is then NULL rather than a guess.
"""

from __future__ import annotations

# (device key, dtype) -> FLOP/s. Keys are matched against the device name in this order
# (most specific first), case-insensitively, as substrings.
PEAK_FLOPS: dict[str, dict[str, float]] = {
    "H100 PCIe": {"bf16": 756e12, "fp16": 756e12, "tf32": 378e12, "fp32": 51.2e12},
    "H100 NVL": {"bf16": 835.5e12, "fp16": 835.5e12, "tf32": 417.5e12, "fp32": 60e12},
    "H200 NVL": {"bf16": 835.5e12, "fp16": 835.5e12, "tf32": 417.5e12, "fp32": 60e12},
    "H100": {"bf16": 989.4e12, "fp16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12},
    "H200": {"bf16": 989.4e12, "fp16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12},
    # GB200 (Grace Blackwell, 1200 W) is its own part: NVIDIA's GB200 NVL72 datasheet, "Individual
    # Blackwell GPU Specifications", FP16/BF16 5 PFLOPS and TF32 2.5 PFLOPS with sparsity (halved
    # here), FP32 80 TFLOPS. Listed before B200, which its name contains.
    "GB200": {"bf16": 2500e12, "fp16": 2500e12, "tf32": 1250e12, "fp32": 80e12},
    "B200": {"bf16": 2250e12, "fp16": 2250e12, "tf32": 1100e12, "fp32": 80e12},  # HGX B200, 1000 W
    "A100": {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
    "V100": {"fp16": 125e12, "fp32": 15.7e12},  # no bf16 tensor cores
    "MI300X": {"bf16": 1307.4e12, "fp16": 1307.4e12, "tf32": 653.7e12, "fp32": 163.4e12},
}
SOURCE = "vendor datasheets, dense (no sparsity), per device"

# Device key (as in PEAK_FLOPS) -> peak memory (HBM) bandwidth in bytes/s, the datasheets' figures.
PEAK_BYTES_PER_S: dict[str, float] = {
    "H100 PCIe": 2.0e12,  # NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe 80GB, 2 TB/s
    "H100 NVL": 3.9e12,  # same datasheet, H100 NVL (94 GB per GPU), 3.9 TB/s
    "H200 NVL": 4.8e12,  # NVIDIA H200 datasheet, H200 NVL 141 GB HBM3e, 4.8 TB/s
    "H100": 3.35e12,  # H100 datasheet, H100 SXM 80GB HBM3, 3.35 TB/s
    "H200": 4.8e12,  # H200 datasheet, H200 SXM 141 GB HBM3e, 4.8 TB/s
    "GB200": 8.0e12,  # GB200 NVL72 datasheet, per Blackwell GPU: 186 GB HBM3e, 8 TB/s
    "B200": 8.0e12,  # HGX B200 datasheet: 64 TB/s over 8 GPUs
    "A100": 2.039e12,  # NVIDIA A100 datasheet, A100 80GB SXM 2,039 GB/s (the 40 GB part: 1,555 GB/s)
    "V100": 900e9,  # NVIDIA V100 datasheet, SXM2 and PCIe, 900 GB/s
    "MI300X": 5.3e12,  # AMD Instinct MI300X data sheet, 192 GB HBM3, 5.3 TB/s
}


# Device key (as in PEAK_FLOPS) -> memory per device in bytes (GB = 1e9 bytes, as the datasheets
# give it); where a part ships in two sizes, the smaller, unless the name says the larger
# (DEVICE_MEMORY_VARIANTS).
DEVICE_MEMORY_BYTES: dict[str, float] = {
    "H100 PCIe": 80e9,  # NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe 80GB
    "H100 NVL": 94e9,  # same datasheet: H100 NVL 94 GB
    "H200 NVL": 141e9,  # NVIDIA H200 datasheet: 141 GB HBM3e
    "H100": 80e9,  # H100 datasheet: H100 SXM 80 GB HBM3
    "H200": 141e9,  # H200 datasheet: H200 SXM 141 GB HBM3e
    "GB200": 186e9,  # GB200 NVL72 datasheet, per Blackwell GPU: 186 GB HBM3e
    "B200": 180e9,  # HGX B200 datasheet: 1.44 TB over 8 GPUs
    "A100": 40e9,  # NVIDIA A100 datasheet: 40 GB HBM2 (the 80 GB part below)
    "V100": 16e9,  # NVIDIA V100 datasheet: 16 GB HBM2 (the 32 GB part below)
    "MI300X": 192e9,  # AMD Instinct MI300X data sheet: 192 GB HBM3
}
# (device key, what the device name holds) -> the larger part's memory.
DEVICE_MEMORY_VARIANTS: dict[tuple[str, str], float] = {("A100", "80g"): 80e9, ("V100", "32g"): 32e9}


def device_key(device_name: str | None) -> str | None:
    """The table key a device name matches, or None."""
    if not device_name:
        return None
    lowered = device_name.lower()
    for key in PEAK_FLOPS:
        if key.lower() in lowered:
            return key
    return None


def peak_flops(device_name: str | None, dtype: str | None) -> float | None:
    """Peak dense FLOP/s of one device for dtype (bf16, fp16, tf32, fp32), or None when unknown."""
    key = device_key(device_name)
    if key is None or dtype is None:
        return None
    return PEAK_FLOPS[key].get(dtype)


def peak_bytes_per_s(device_name: str | None) -> float | None:
    """Peak memory bandwidth of one device in bytes/s, or None when unknown."""
    key = device_key(device_name)
    return None if key is None else PEAK_BYTES_PER_S.get(key)


def device_memory_bytes(device_name: str | None) -> float | None:
    """Memory of one device in bytes, or None when unknown (a CPU, a device not listed)."""
    key = device_key(device_name)
    if key is None:
        return None
    compact = (device_name or "").lower().replace(" ", "").replace("-", "")
    larger = [size for (k, sign), size in DEVICE_MEMORY_VARIANTS.items() if k == key and sign in compact]
    return larger[0] if larger else DEVICE_MEMORY_BYTES.get(key)


def roofline_flops(peak: float | None, bandwidth: float | None, intensity: float | None) -> float | None:
    """The roofline bound in FLOP/s: min(peak, intensity · bandwidth); intensity in FLOPs per byte.

    An op with no known bytes (intensity None) is bound by the peak alone; an unknown peak or
    bandwidth gives None rather than a guess.
    """
    if peak is None:
        return None
    if intensity is None:
        return peak
    if bandwidth is None:
        return None
    return min(peak, intensity * bandwidth)


# The first CUDA compute capability with bf16 tensor cores (Ampere, sm_80); V100 (7.0) and
# Turing (7.5) train in fp16 instead.
BF16_CAPABILITY = (8, 0)


def training_dtype(device_type: str, capability: tuple[int, int] | None = None) -> str:
    """The dtype the reference workload trains in on this device: fp32 on CPU, bf16 where the
    device has bf16 tensor cores (ROCm parts, CUDA capability 8.0 and later), else fp16."""
    if device_type == "cpu":
        return "fp32"
    if device_type == "rocm":
        return "bf16"
    if capability is None:
        raise ValueError("a CUDA device's dtype needs its compute capability")
    return "bf16" if tuple(capability) >= BF16_CAPABILITY else "fp16"


def seed_rows() -> list[tuple[int, str, str, float, float]]:
    """(match_order, device key, dtype, FLOP/s, bytes/s) rows of the SQL table device_peaks."""
    return [
        (order, key, dtype, value, PEAK_BYTES_PER_S[key])
        for order, (key, by_dtype) in enumerate(PEAK_FLOPS.items())
        for dtype, value in sorted(by_dtype.items())
    ]


def table_rows() -> list[dict[str, object]]:
    """The table as rows (device, dtype, peak_flops) for printing."""
    return [
        {"device": key, "dtype": dtype, "peak_flops": value}
        for key, by_dtype in PEAK_FLOPS.items()
        for dtype, value in by_dtype.items()
    ]
