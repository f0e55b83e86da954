"""The time of a compute op at another size: a per-class efficiency curve fitted on the study's calls.

A change of tensor parallelism splits the matmul and attention ops of each layer, so each runs at
a fraction of its measured FLOPs; a smaller product seldom runs at the same rate. Per device type
and op class (`pipeline/ops/costs.py`'s categories: matmul, attention), the study's calls with
FLOPs counted (op_calls.counted_flops, the once-only rule) and a self time give points (FLOPs,
achieved FLOP/ns); the curve is their median rate per power-of-two bin of FLOPs, joined by straight
lines in log-log, and flat beyond the first and last bins (no extrapolation). Calls of runs with
tensor parallelism are left out (a DTensor op's own self time is its dispatch, not its FLOPs), and
of runs with pipeline parallelism (a change of pipeline parallelism is checked against them).
The time of an op at FLOPs F' against its measured time at F is (F' / rate(F')) / (F / rate(F)),
so an op at its own size keeps its measured time (docs/projection.md, "A change of tensor
parallelism"). A pipeline's micro-batches run every op with counted FLOPs or bytes at a fraction of them:
`category_curves` fits one curve per category of `costs.py` (elementwise, norm, softmax, ...) the
same way, on FLOPs, and on bytes for the calls that count bytes only (a fill, a copy, an embedding
lookup): docs/projection.md, "A change of pipeline parallelism".
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
# The calls a curve rests on: CPU calls of the class with counted FLOPs (or, for a curve on bytes,
# with counted bytes and no FLOPs), on runs with neither tensor nor pipeline parallelism, of the
# device type.
CALLS = """
    SELECT c.name, c.counted_{measure} AS work, c.self_ns
    FROM op_calls AS c JOIN runs AS r USING (study, run_id)
    WHERE c.study = $study AND coalesce(r.device_type, 'cpu') = $device AND coalesce(r.tp, 1) = 1
      AND coalesce(r.pp, 1) = 1
      AND NOT c.gpu_rank AND c.on_timeline AND c.self_ns > 0 AND c.counted_{measure} > 0
      AND ($measure = 'flops' OR coalesce(c.counted_flops, 0) = 0)
      AND c.name IN (SELECT unnest($names))"""
# A curve's work: its rate's unit and its name.
MEASURES = {"flops": ("FLOP", "FLOPs"), "bytes": ("B", "bytes")}


@dataclass(frozen=True)
class Curve:
    """One class's achieved rate against its work per call (FLOPs, or bytes): bin centres and
    median rates, both log2."""

    op_class: str
    log_flops: np.ndarray  # log2 of the work (FLOPs, or bytes where `measure` says so)
    log_rate: np.ndarray
    calls: int
    measure: str = "flops"  # a key of MEASURES

    def rate(self, flops: np.ndarray) -> np.ndarray:
        """FLOP/ns at each FLOPs (flat beyond the measured bins)."""
        return np.exp2(np.interp(np.log2(flops), self.log_flops, self.log_rate))

    def time_ratio(self, flops: np.ndarray, new_flops: np.ndarray) -> np.ndarray:
        """An op's time at new_flops over its time at flops."""
        return (new_flops / self.rate(new_flops)) / (flops / self.rate(flops))

    def describe(self) -> str:
        lo, hi = np.exp2(self.log_flops[[0, -1]])
        rates = np.exp2(self.log_rate[[0, -1]])
        unit, work = MEASURES[self.measure]
        return (
            f"{self.op_class}: {rates[0]:.3g} to {rates[1]:.3g} G{unit}/s from {lo:.3g} to {hi:.3g} {work} "
            f"a call ({self.calls} calls)"
        )


@dataclass(frozen=True)
class LatencyFit:
    """A category's time per call as a fixed part and a part per unit of work, t(w) = latency +
    w x per_unit, fitted on a curve's bins: a pipeline's ops other than matmul and attention (many
    op kinds share a category, whose binned medians need not fall with the work)."""

    latency_ns: float
    ns_per_unit: float

    @classmethod
    def of(cls, curve: Curve) -> LatencyFit:
        """The fit minimising the relative error over the curve's bins, both terms >= 0 (the better
        of the two one-term fits where the two-term one has a negative term)."""
        work = np.exp2(curve.log_flops)
        ns = work / np.exp2(curve.log_rate)
        terms = np.stack([1.0 / ns, work / ns], axis=1)  # (latency, per_unit) . terms = 1 at every bin
        (latency, per_unit), *_ = np.linalg.lstsq(terms, np.ones(len(ns)), rcond=None)
        if latency >= 0 and per_unit >= 0:
            return cls(float(latency), float(per_unit))
        fits = [cls(float(np.sum(t) / np.sum(t * t)), 0.0) for t in [terms[:, 0]]]
        fits += [cls(0.0, float(np.sum(t) / np.sum(t * t))) for t in [terms[:, 1]]]
        return min(fits, key=lambda f: float(np.sum((terms @ [f.latency_ns, f.ns_per_unit] - 1.0) ** 2)))

    def time_ratio(self, work: np.ndarray, new_work: np.ndarray) -> np.ndarray:
        """An op's time at new_work over its time at work."""
        return (self.latency_ns + self.ns_per_unit * new_work) / (self.latency_ns + self.ns_per_unit * work)


def fit_curve(op_class: str, flops: np.ndarray, self_ns: np.ndarray, measure: str = "flops") -> Curve | None:
    """The class's curve from its calls' work (FLOPs, or bytes: `measure`) and self times (None
    without any)."""
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
    return Curve(op_class, np.array(centres), np.array(rates), len(flops), measure)


def study_curves(connection: duckdb.DuckDBPyConnection, study: str, device_type: str) -> dict[int, Curve]:
    """Per class code (SPLIT_CLASSES), the device type's curve in the study, where it has calls."""
    classes = {name: SPLIT_CLASSES[code] for name, code in CLASS_OF.items()}
    by_name = _curves(connection, study, device_type, classes, "flops")
    return {code: by_name[op_class] for code, op_class in enumerate(SPLIT_CLASSES) if op_class in by_name}


def category_curves(
    connection: duckdb.DuckDBPyConnection, study: str, device_type: str
) -> dict[tuple[str, str], Curve]:
    """Per (category of `costs.py`: matmul, attention, elementwise, norm, ...; measure: "flops" or
    "bytes"), the device type's curve in the study, where it has calls."""
    categories = {name: CATEGORY_OF[formula] for name, formula in FORMULA_OF.items()}
    return {
        (category, measure): curve
        for measure in MEASURES
        for category, curve in _curves(connection, study, device_type, categories, measure).items()
    }


def _curves(
    connection: duckdb.DuckDBPyConnection,
    study: str,
    device_type: str,
    group_of: dict[str, str],
    measure: str,
) -> dict[str, Curve]:
    """One curve per group of op names (`group_of`: name -> group) on `measure` (MEASURES), where
    the group has calls."""
    params = {"study": study, "device": device_type, "names": list(group_of), "measure": measure}
    calls = connection.sql(CALLS.format(measure=measure), params=params).pl()
    groups = calls["name"].replace_strict(group_of, return_dtype=pl.String)
    out = {}
    for group in sorted(set(group_of.values())):
        mine = calls.filter(groups == group)
        curve = fit_curve(group, mine["work"].to_numpy(), mine["self_ns"].to_numpy(), measure)
        if curve is not None:
            out[group] = curve
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
