"""Communication that competes: a collective's transfer stretches while its ranks compute.

Overlapped communication and compute slow each other down: on GPUs NCCL kernels share SMs and
memory bandwidth with the kernels they overlap; on CPU, gloo's threads and the loopback share the
cores with the ranks' compute. The network model (a calibration sweep, nccl-tests, or a fit over
every measured instance) says nothing of when a transfer runs, so a projection that times every
transfer from it misses the stretch, and the split between exposed communication and compute
with it (see docs/projection.md, "Communication that competes").

The model, per device type (the runs' `device_type`; `cpu` for gloo runs):

    transfer = network time x level x (1 + stretch x overlap)

`overlap` is the share of the instance's transfer (from its last arrival) during which its ranks
compute, the mean over its members; `stretch` is fitted over the measured instances of every
multi-rank run of that device type in the study (least squares in time over STRETCH_GRID, one
`scale` per run: the run's level against its network model). In a projection a measured instance
keeps its own level (its measured transfer over its network time and stretch at the measured
layout); any other takes its link's (`Interference.link_scale`).
The compute a transfer overlaps stretches the same way: `compute = alone x (1 + compute_stretch x
overlap)`, overlap the share of the op's time with a transfer in flight on its rank, fitted per
op signature (name, input shapes and types, phase) from the calls of that signature with and
without a transfer in flight (the time-weighted median over signatures; a CPU op during which a
transfer of its rank ended is left out: it may have waited for it).

A projection replays twice: the first pass places every transfer and compute piece with its
measured overlap (a planned collective with none), the second with the overlaps the first pass
shows, so a data-parallel all-reduce that a projection moves under the backward pass stretches as
it would, and so does the compute under it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace

import duckdb
import numpy as np
import polars as pl
from tracehouse.pipeline.projection.build import RunGraph
from tracehouse.pipeline.projection.graph import Cost
from tracehouse.pipeline.projection.network import calibrated_network, rank_hosts
from tracehouse.pipeline.projection.scenario import Scenario, instance_transfers, layout_for
from tracehouse.pipeline.projection.timeline import RunTimeline, op_signatures_frame
from tracehouse.pipeline.warehouse.meta import has_relation
from tracehouse.pipeline.warehouse.sql_runner import raw_ddl

# The stretches tried by the fit (transfer x (1 + stretch x overlap)): 0 to 8 in steps of 0.02.
STRETCH_GRID = np.linspace(0.0, 8.0, 401)
# A device type needs this many measured instances, some overlapped, for a fit of its own.
MIN_INSTANCES = 8
MIN_OVERLAPPED = 3
# An instance counts as overlapped when its ranks compute for at least this share of its transfer.
OVERLAPPED_SHARE = 0.25
# Stored fits of another model version are fitted again (sql/raw/interference_fits.sql).
MODEL_VERSION = 1
# What a study's fit rests on: its traces (a stored fit of other traces is fitted again).
STUDY_DIGEST = "SELECT md5(string_agg(content_hash, ',' ORDER BY content_hash)) FROM traces WHERE study = ?"
FIT_COLUMNS = (
    "study, device_type, transfer_stretch, compute_stretch, collectives, runs, signatures, "
    "transfer_error_before, transfer_error_after, run_scales, traces_digest, model_version"
)
# Without a fit: no stretch (documented in docs/projection.md), except where a device type has a
# default: (transfer, compute) stretches measured elsewhere. cpu: the sample study's fit (9 CPU runs
# of the reference workload with gloo, 2 ranks per 2 cores, 2026-12-07; docs/projection.md).
DEFAULT_STRETCH = 0.0
DEFAULTS = {"cpu": (3.42, 0.14)}
# An op signature counts for the compute fit with this many calls alone and this many overlapped
# (a transfer in flight for at least OVERLAPPED_CALL of the call); a device type needs MIN_SIGNATURES.
MIN_CALLS = 3
OVERLAPPED_CALL = 0.5
MIN_SIGNATURES = 10


@dataclass(frozen=True)
class InstanceSample:
    """One measured instance: its transfer against the network model's, and its overlap."""

    run_id: str
    measured_ns: float  # the measured transfer
    modelled_ns: float  # the network time at the measured layout
    overlap: float


@dataclass(frozen=True)
class Interference:
    """The fitted stretch of one device type, each run's scale, and what the fit rests on."""

    device_type: str
    stretch: float = DEFAULT_STRETCH
    scales: dict[str, float] = field(default_factory=dict)
    instances: int = 0
    runs: int = 0
    error_before: float | None = None  # sum |measured - modelled| / sum measured, scales only
    error_after: float | None = None  # the same with the stretch
    compute_stretch: float = DEFAULT_STRETCH
    signatures: int = 0  # op signatures the compute stretch rests on

    def link_scale(self, run_id: str, source: str | None) -> float:
        """The level of a link's times against idle transfers: the run's own scale for a link
        fitted on the run's instances, the median of the fitted runs' for one fitted on the
        study's other runs, 1 for a calibration sweep or nccl-tests (idle by construction) and
        for a network file (the user's network)."""
        if source == "run":
            return self.scales.get(run_id, 1.0)
        if source == "study" and self.scales:
            return float(np.median(list(self.scales.values())))
        return 1.0

    def describe(self) -> str:
        """The model in words, stored with each projected point."""
        fallback = "the default for " + self.device_type if self.device_type in DEFAULTS else "none assumed"
        transfers = (
            f"transfers x (1 + {self.stretch:.2f} x overlap), fitted on {self.instances} collectives of "
            f"{self.runs} run(s)"
            if self.instances
            else f"transfers x (1 + {self.stretch:g} x overlap): {fallback} (no multi-rank run with "
            f"{MIN_INSTANCES}+ measured collectives, {MIN_OVERLAPPED}+ of them overlapped)"
        )
        compute = (
            f"compute x (1 + {self.compute_stretch:.2f} x overlap), fitted on {self.signatures} op signatures"
            if self.signatures
            else f"compute x (1 + {self.compute_stretch:g} x overlap): {fallback} (fewer than "
            f"{MIN_SIGNATURES} op signatures measured with and without a transfer in flight)"
        )
        return f"interference ({self.device_type}): {transfers}; {compute}"


def unfitted(device_type: str) -> Interference:
    """A device type's interference without a fit of its own: its default, else none."""
    transfer, compute = DEFAULTS.get(device_type, (DEFAULT_STRETCH, DEFAULT_STRETCH))
    return Interference(device_type, stretch=transfer, compute_stretch=compute)


def union_of(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals (starts, ends) covering the spans [starts[i], ends[i]): empty ones
    dropped, touching ones joined."""
    keep = ends > starts
    order = np.lexsort((ends[keep], starts[keep]))
    s, e = starts[keep][order], ends[keep][order]
    if len(s) == 0:
        return np.array([]), np.array([])
    reach = np.maximum.accumulate(e)  # the latest end so far
    first = np.concatenate([[True], s[1:] > reach[:-1]])  # a span that starts a new interval
    last = np.concatenate([np.flatnonzero(first)[1:] - 1, [len(s) - 1]])
    return s[first], reach[last]


def rank_unions(run: RunGraph, times: np.ndarray, klass: str) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per rank, the union of its intervals of class `klass` in the given times."""
    rank, start, end, classes, _ = run.interval_arrays
    mine = classes == klass
    return {
        int(r): union_of(times[start[mine & (rank == r)]], times[end[mine & (rank == r)]])
        for r in np.unique(rank[mine])
    }


def covered(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """How much of each [lo, hi) the disjoint sorted intervals cover."""
    if len(starts) == 0:
        return np.zeros(len(lo))
    lengths = ends - starts
    before = np.concatenate([[0.0], np.cumsum(lengths)])  # covered before each interval starts

    def upto(x: np.ndarray) -> np.ndarray:
        """How much lies before x: the intervals before the last one starting at or before x,
        and as much of that one as x reaches."""
        k = np.searchsorted(starts, x, side="right") - 1
        at = np.maximum(k, 0)
        return np.where(k >= 0, before[at] + np.clip(x - starts[at], 0.0, lengths[at]), 0.0)

    return np.maximum(upto(hi) - upto(lo), 0.0)


def instance_overlaps(run: RunGraph, times: np.ndarray, transfer_ns: np.ndarray) -> np.ndarray:
    """Per instance: the share of its transfer (from its arrival, `transfer_ns` long) during which
    its members' ranks compute, the mean over its members; 0 for an instance without transfer."""
    n = len(run.instances.members)
    out = np.zeros(n)
    if n == 0:
        return out
    merged = rank_unions(run, times, "compute")
    empty = (np.array([]), np.array([]))
    lo = times[np.array(run.instances.arrival, dtype=np.int64)]
    length = np.asarray(transfer_ns[:n], dtype=np.float64)
    by_rank: dict[int, list[int]] = defaultdict(list)
    for i, members in enumerate(run.instances.members):
        for rank, _, _ in members:
            by_rank[rank].append(i)
    total = np.zeros(n)
    count = np.zeros(n)
    for rank, rows in by_rank.items():
        idx = np.array(rows, dtype=np.int64)
        starts, ends = merged.get(rank, empty)
        total[idx] += covered(starts, ends, lo[idx], lo[idx] + length[idx])
        count[idx] += length[idx]
    np.divide(total, count, out=out, where=count > 0)
    return np.clip(out, 0.0, 1.0)


def measured_samples(run_id: str, run: RunGraph, modelled_ns: np.ndarray) -> list[InstanceSample]:
    """The run's measured instances (more than one member, a positive transfer and network time)."""
    g = run.graph
    overlaps = instance_overlaps(run, g.measured_times(), run.transfer_ns)
    inst = run.instances
    return [
        InstanceSample(run_id, float(inst.transfer_ns[i]), float(modelled_ns[i]), float(overlaps[i]))
        for i in range(len(inst.members))
        if len(inst.members[i]) > 1 and inst.transfer_ns[i] > 0 and modelled_ns[i] > 0
    ]


def fit_interference(device_type: str, samples: list[InstanceSample]) -> Interference:
    """The stretch that best explains the samples' measured transfers, with one scale per run:
    least squares in time (the long transfers, which the breakdown feels, weigh most) over
    STRETCH_GRID, each run's scale in closed form; none when too few instances, or too few
    overlapped ones."""
    overlapped = sum(s.overlap >= OVERLAPPED_SHARE for s in samples)
    if len(samples) < MIN_INSTANCES or overlapped < MIN_OVERLAPPED:
        return unfitted(device_type)
    runs = sorted({s.run_id for s in samples})
    run_index = np.array([runs.index(s.run_id) for s in samples])
    measured = np.array([s.measured_ns for s in samples])
    modelled = np.array([s.modelled_ns for s in samples])
    overlap = np.array([s.overlap for s in samples])

    def fitted(stretch: float) -> tuple[float, np.ndarray, np.ndarray]:
        x = modelled * (1.0 + stretch * overlap)
        scale = np.bincount(run_index, measured * x, len(runs)) / np.bincount(run_index, x * x, len(runs))
        predicted = scale[run_index] * x
        return float(np.sum((measured - predicted) ** 2)), scale, predicted

    best = min(((*fitted(k), float(k)) for k in STRETCH_GRID), key=lambda item: item[0])
    _, scale, predicted = best[:3]
    _, _, plain = fitted(0.0)
    return Interference(
        device_type,
        stretch=best[3],
        scales={run: float(v) for run, v in zip(runs, scale, strict=True)},
        instances=len(samples),
        runs=len(runs),
        error_before=float(np.sum(np.abs(measured - plain)) / np.sum(measured)),
        error_after=float(np.sum(np.abs(measured - predicted)) / np.sum(measured)),
    )


@dataclass(frozen=True)
class OpCall:
    """One op call for the compute fit: its signature, rank, span (ns in the replay's frame) and
    the duration that stretches (a CPU op's self time, a kernel's duration)."""

    key: tuple
    rank: int
    start: float
    end: float
    duration: float
    blocking_check: bool  # a CPU op: left out when a transfer of its rank ends inside it


@dataclass(frozen=True)
class OpSignature:
    """One op signature of one run: its median time alone and overlapped, the mean overlap of
    the overlapped calls and their time (the signature's weight)."""

    alone_ns: float
    overlapped_ns: float
    overlap: float
    weight_ns: float

    @property
    def stretch(self) -> float:
        return (self.overlapped_ns / self.alone_ns - 1.0) / self.overlap


def transfer_spans(run: RunGraph, times: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per rank, the union of its communication intervals in the given times."""
    return rank_unions(run, times, "comm")


def op_signatures(run: RunGraph, calls: list[OpCall]) -> list[OpSignature]:
    """The run's signatures with MIN_CALLS calls alone and MIN_CALLS overlapped (measured times)."""
    comm = transfer_spans(run, run.graph.measured_times())
    empty = (np.array([]), np.array([]))
    by_rank = defaultdict(list)
    for call in calls:
        by_rank[call.rank].append(call)
    groups: dict[tuple, tuple[list, list]] = defaultdict(lambda: ([], []))
    for rank, rows in by_rank.items():
        starts, ends = comm.get(rank, empty)
        lo = np.array([c.start for c in rows])
        hi = np.array([c.end for c in rows])
        overlap = covered(starts, ends, lo, hi) / np.maximum(hi - lo, 1.0)
        # a transfer ending strictly inside the call: the call may have waited for it
        inside = np.searchsorted(ends, hi, side="left") - np.searchsorted(ends, lo, side="right") > 0
        for call, o, waited in zip(rows, overlap, inside, strict=True):
            if call.blocking_check and waited:
                continue
            if o == 0:
                groups[call.key][0].append((0.0, call.duration))
            elif o >= OVERLAPPED_CALL:
                groups[call.key][1].append((float(o), call.duration))
    out = []
    for alone, overlapped in groups.values():
        if len(alone) >= MIN_CALLS and len(overlapped) >= MIN_CALLS:
            out.append(
                OpSignature(
                    alone_ns=float(np.median([d for _, d in alone])),
                    overlapped_ns=float(np.median([d for _, d in overlapped])),
                    overlap=float(np.mean([o for o, _ in overlapped])),
                    weight_ns=float(sum(d for _, d in overlapped)),
                )
            )
    return [s for s in out if s.alone_ns > 0]


def fit_compute_stretch(signatures: list[OpSignature]) -> tuple[float, int] | None:
    """The time-weighted median of the signatures' stretches (never below 0), and how many there
    were; None when fewer than MIN_SIGNATURES."""
    if len(signatures) < MIN_SIGNATURES:
        return None
    ordered = sorted(signatures, key=lambda s: s.stretch)
    weights = np.cumsum([s.weight_ns for s in ordered])
    middle = ordered[int(np.searchsorted(weights, weights[-1] / 2.0))]
    return max(0.0, middle.stretch), len(signatures)


def compute_overlaps(run: RunGraph, times: np.ndarray) -> np.ndarray:
    """Per edge: the share of a compute edge's span with a transfer of its rank in flight (0 for
    every other edge)."""
    g = run.graph
    out = np.zeros(len(g.src))
    is_compute = np.isin(g.cost, (Cost.COMPUTE_MATMUL, Cost.COMPUTE_OTHER))
    if not is_compute.any():
        return out
    comm = transfer_spans(run, times)
    edges = np.flatnonzero(is_compute)
    ranks = g.rank[g.src[edges]]
    for rank in np.unique(ranks):
        if int(rank) not in comm:
            continue
        mine = edges[ranks == rank]
        lo, hi = times[g.src[mine]], times[g.dst[mine]]
        starts, ends = comm[int(rank)]
        out[mine] = covered(starts, ends, lo, hi) / np.maximum(hi - lo, 1.0)
    return np.clip(out, 0.0, 1.0)


@dataclass
class FitSamples:
    """What the interference fit of one device type rests on, gathered run by run."""

    instances: list[InstanceSample] = field(default_factory=list)
    signatures: list[OpSignature] = field(default_factory=list)

    def fit(self, device: str) -> Interference:
        fitted = fit_interference(device, self.instances)
        compute = fit_compute_stretch(self.signatures)
        if compute is None:
            return replace(fitted, compute_stretch=unfitted(device).compute_stretch, signatures=0)
        return replace(fitted, compute_stretch=compute[0], signatures=compute[1])


def add_samples(
    samples: FitSamples,
    connection: duckdb.DuckDBPyConnection,
    study: str,
    run_id: str,
    built: tuple[RunTimeline, RunGraph],
    devices_per_node: int,
) -> None:
    """Add the run's measured instances, each timed by the run's own calibrated network at its
    measured layout, and its op signatures (none for a one-rank run)."""
    timeline, run = built
    if timeline.facts.world_size < 2 or not run.instances.members:
        return
    network = calibrated_network(connection, study=study, run_id=run_id, devices_per_node=devices_per_node)
    layout = layout_for(timeline.facts, timeline.facts.world_size)
    modelled = instance_transfers(run, layout, Scenario(), network, rank_hosts(connection, study, run_id))
    samples.instances += measured_samples(run_id, run, modelled.ns)
    calls = op_calls_for_fit(run, op_signatures_frame(connection, study, run_id))
    samples.signatures += op_signatures(run, calls)


def op_calls_for_fit(run: RunGraph, frame: pl.DataFrame) -> list[OpCall]:
    """CPU ranks: each compute call's span and self time; GPU ranks: each compute kernel (a
    graph edge) under the signature of the op that launched it."""
    g = run.graph
    origin = g.origin
    calls = []
    launched = {}
    for row in frame.iter_rows(named=True):
        key = (row["name"], row["input_dims"], row["input_types"], row["phase"])
        if row["gpu_rank"]:
            launched[(row["rank"], row["op_id"])] = key
        else:
            start, end = row["start_ns"] - origin, row["end_ns"] - origin
            calls.append(OpCall(key, row["rank"], start, end, row["self_ns"], True))
    if launched:
        times = g.measured_times()
        for e in np.flatnonzero(np.isin(g.cost, (Cost.COMPUTE_MATMUL, Cost.COMPUTE_OTHER)) & (g.op_id >= 0)):
            rank = int(g.rank[g.src[e]])
            key = launched.get((rank, int(g.op_id[e])))
            if key is not None:
                label = g.labels[g.label[e]] if g.label[e] >= 0 else None
                start, end = times[g.src[e]], times[g.dst[e]]
                calls.append(OpCall((label, *key), rank, start, end, float(g.base[e]), False))
    return calls


def device_type(timeline: RunTimeline) -> str:
    """The run's device type (its manifest's), else cpu for a run of CPU ranks only, else gpu."""
    if timeline.facts.device_type:
        return timeline.facts.device_type
    return "gpu" if timeline.gpu_ranks else "cpu"


def stored_fits(connection: duckdb.DuckDBPyConnection, study: str) -> dict[str, Interference] | None:
    """The study's stored fits when they were made from its current traces by this model, else None."""
    if not has_relation(connection, "interference_fits"):
        return None
    digest = connection.execute(STUDY_DIGEST, [study]).fetchall()[0][0]
    rows = connection.execute(
        f"SELECT {FIT_COLUMNS} FROM interference_fits WHERE study = ? ORDER BY device_type", [study]
    ).fetchall()
    if not rows or any(row[-2] != digest or row[-1] != MODEL_VERSION for row in rows):
        return None
    return {
        device: Interference(
            device,
            stretch=transfer,
            compute_stretch=compute,
            instances=collectives,
            runs=runs,
            signatures=signatures,
            error_before=before,
            error_after=after,
            scales=json.loads(scales),
        )
        for _, device, transfer, compute, collectives, runs, signatures, before, after, scales, _, _ in rows
    }


def store_fits(connection: duckdb.DuckDBPyConnection, study: str, fits: dict[str, Interference]) -> None:
    """Replace the study's stored fits (in the caller's transaction)."""
    connection.execute(raw_ddl("interference_fits"))
    digest = connection.execute(STUDY_DIGEST, [study]).fetchall()[0][0]
    connection.execute("DELETE FROM interference_fits WHERE study = ?", [study])
    for fit in fits.values():
        connection.execute(
            f"INSERT INTO interference_fits ({FIT_COLUMNS}, fitted_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)",
            [
                study,
                fit.device_type,
                fit.stretch,
                fit.compute_stretch,
                fit.instances,
                fit.runs,
                fit.signatures,
                fit.error_before,
                fit.error_after,
                json.dumps(fit.scales, sort_keys=True),
                digest,
                MODEL_VERSION,
            ],
        )
