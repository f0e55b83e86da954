"""The time of a compute op at another size: a per-class efficiency curve fitted on the study's calls.

A change of tensor parallelism splits the matmul and attention ops of each layer, so each runs at
a fraction of its measured FLOPs; a smaller product seldom runs at the same rate. Per device type
and op class (`pipeline/ops/costs.py`'s categories: matmul, attention), the study's calls with
FLOPs counted (op_calls.counted_flops, the once-only rule) and a self time give points (FLOPs,
achieved FLOP/ns); the curve is their median rate per power-of-two bin of FLOPs, joined by straight
lines in log-log, and flat beyond the first and last bins (no extrapolation). Calls of runs with
tensor parallelism are left out: a DTensor op's own self time is its dispatch, not its FLOPs.
The time of an op at FLOPs F' against its measured time at F is (F' / rate(F')) / (F / rate(F)),
so an op at its own size keeps its measured time (docs/projection.md, "A change of tensor
parallelism").
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl
from tracehouse.pipeline.ops.costs import CATEGORY_OF, FORMULA_OF

SPLIT_CLASSES = ("matmul", "attention")  # the op classes tensor parallelism splits (index: class code)
# Op name -> class code, for the ops of SPLIT_CLASSES.
CLASS_OF = {
    name: SPLIT_CLASSES.index(CATEGORY_OF[formula])
    for name, formula in FORMULA_OF.items()
    if CATEGORY_OF[formula] in SPLIT_CLASSES
}
# The calls a curve rests on: CPU calls of the class with counted FLOPs, on runs without tensor
# parallelism, of the device type.
CALLS = """
    SELECT c.name, c.counted_flops AS flops, c.self_ns
    FROM op_calls AS c JOIN runs AS r USING (study, run_id)
    WHERE c.study = $study AND coalesce(r.device_type, 'cpu') = $device AND coalesce(r.tp, 1) = 1
      AND NOT c.gpu_rank AND c.on_timeline AND c.counted_flops > 0 AND c.self_ns > 0
      AND c.name IN (SELECT unnest($names))"""


@dataclass(frozen=True)
class Curve:
    """One class's achieved rate against FLOPs: bin centres and median rates, both log2."""

    op_class: str
    log_flops: np.ndarray
    log_rate: np.ndarray
    calls: int

    def rate(self, flops: np.ndarray) -> np.ndarray:
        """FLOP/ns at each FLOPs (flat beyond the measured bins)."""
        return np.exp2(np.interp(np.log2(flops), self.log_flops, self.log_rate))

    def time_ratio(self, flops: np.ndarray, new_flops: np.ndarray) -> np.ndarray:
        """An op's time at new_flops over its time at flops."""
        return (new_flops / self.rate(new_flops)) / (flops / self.rate(flops))

    def describe(self) -> str:
        lo, hi = np.exp2(self.log_flops[[0, -1]])
        rates = np.exp2(self.log_rate[[0, -1]])
        return (
            f"{self.op_class}: {rates[0]:.3g} to {rates[1]:.3g} GFLOP/s from {lo:.3g} to {hi:.3g} FLOPs "
            f"a call ({self.calls} calls)"
        )


def fit_curve(op_class: str, flops: np.ndarray, self_ns: np.ndarray) -> Curve | None:
    """The class's curve from its calls (None without any)."""
    if not len(flops):
        return None
    log_flops = np.log2(flops.astype(np.float64))
    log_rate = np.log2(flops / self_ns.astype(np.float64))
    bins = np.floor(log_flops).astype(np.int64)
    centres, rates = [], []
    for b in np.unique(bins):
        inside = bins == b
        centres.append(float(np.median(log_flops[inside])))
        rates.append(float(np.median(log_rate[inside])))
    return Curve(op_class, np.array(centres), np.array(rates), len(flops))


def study_curves(connection: duckdb.DuckDBPyConnection, study: str, device_type: str) -> dict[int, Curve]:
    """Per class code (SPLIT_CLASSES), the device type's curve in the study, where it has calls."""
    calls = connection.sql(
        CALLS, params={"study": study, "device": device_type, "names": list(CLASS_OF)}
    ).pl()
    codes = calls["name"].replace_strict(CLASS_OF, return_dtype=pl.Int64)
    out = {}
    for code, op_class in enumerate(SPLIT_CLASSES):
        mine = calls.filter(codes == code)
        curve = fit_curve(op_class, mine["flops"].to_numpy(), mine["self_ns"].to_numpy())
        if curve is not None:
            out[code] = curve
    return out


def split_factors(
    curves: dict[int, Curve], op_class: np.ndarray, flops: np.ndarray, share: float
) -> np.ndarray:
    """Per edge: its time factor when each split op (class code >= 0, FLOPs > 0) does `share` of
    its measured FLOPs (tp / tp_new); 1 for every other edge, and for a class without a curve
    the FLOPs ratio itself."""
    factor = np.ones(len(flops))
    for code in np.unique(op_class[op_class >= 0]):
        mine = (op_class == code) & (flops > 0)
        curve = curves.get(int(code))
        if curve is None:
            factor[mine] = share
        else:
            factor[mine] = curve.time_ratio(flops[mine], flops[mine] * share)
    return factor
