"""The network model a projection times collectives with: alpha-beta over ring and tree algorithms.

time(op, bytes, n) = latency x steps(op, n) + bytes x f(op, n) / busbw, with f the nccl-tests
bus-bandwidth factor (so busbw is what nccl-tests prints) and steps the algorithm's sequential
hops: ring all_gather / reduce_scatter / all_to_all n-1; all_reduce the fewer of the ring's
2(n-1) and the tree's 2 ceil(log2 n) (NCCL picks the faster; equal bandwidth assumed);
broadcast / reduce ceil(log2 n); send / recv 1. A group is placed on the topology from its ranks
and the rank -> host map (`place_group`): all ranks on one host use the intra-node level, a group
spanning hosts is bound by the inter-node level, whatever its size (a strided data-parallel group
{r, r+8} on 2x8 devices spans two nodes).

Levels come from a network file (TOML, see docs/projection.md) or are fitted, per op and level,
by least squares on the warehouse's `network_curves` (nccl-tests output, `tracehouse calibrate`,
and the measured collective instances of the runs).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

import duckdb
import numpy as np
import tomllib
from tracehouse.pipeline.common.comm_names import curve_op
from tracehouse.pipeline.common.errors import TracehouseError

LEVELS = ("intra_node", "inter_node")
# Points fitted per op (send and recv are timed by the send_recv curve: comm_names.curve_op); an op
# without its own points borrows all_reduce's level.
FALLBACK_OP = "all_reduce"


def bus_factor(op: str | None, n: int) -> float:
    """nccl-tests' busbw / algbw factor."""
    if n <= 1:
        return 0.0
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return (n - 1) / n
    return 1.0


def latency_steps(op: str | None, n: int) -> float:
    """Sequential hops of the algorithm (see the module docstring)."""
    if n <= 1:
        return 0.0
    if op == "all_reduce":
        return float(min(2 * (n - 1), 2 * math.ceil(math.log2(n))))
    if op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return float(n - 1)
    if op in ("broadcast", "reduce"):
        return float(math.ceil(math.log2(n)))
    return 1.0


@dataclass(frozen=True)
class Placement:
    """Where a group sits: how many nodes it spans and the most ranks it has on one of them."""

    nodes: int
    ranks_per_node: int

    @property
    def level(self) -> str:
        return "intra_node" if self.nodes <= 1 else "inter_node"


def place_group(ranks: Iterable[int], host_of: Mapping[int, Hashable | None]) -> Placement | None:
    """The group's placement from the rank -> host map; None when a rank's host is unknown."""
    hosts = [host_of.get(rank) for rank in ranks]
    if not hosts or any(host is None for host in hosts):
        return None
    per_host = Counter(hosts)
    return Placement(nodes=len(per_host), ranks_per_node=max(per_host.values()))


def packed_hosts(world_size: int, devices_per_node: int) -> dict[int, int]:
    """The rank -> node map of a projected layout: ranks fill each node's devices in order (the
    launchers' --nproc_per_node order), devices_per_node being the node's capacity."""
    return {rank: rank // devices_per_node for rank in range(world_size)}


def rank_hosts(connection: duckdb.DuckDBPyConnection, study: str, run_id: str) -> dict[int, str | None]:
    """The measured run's rank -> host map (traces.host; None where a trace names no host)."""
    rows = connection.execute(
        "SELECT rank, host FROM traces WHERE study = ? AND run_id = ?", [study, run_id]
    ).fetchall()
    return {int(rank): host for rank, host in rows}


# Where a fitted link's points came from, by tier (calibrated_network), and a network file's.
LINK_SOURCES = ("run", "calibration", "study")
FILE_SOURCE = "file"


@dataclass(frozen=True)
class Link:
    """One level of the network: bus bandwidth (GB/s, nccl-tests' busbw) and per-hop latency;
    `source` says what it was fitted on (LINK_SOURCES) or that a network file gave it."""

    busbw_gbps: float
    latency_us: float
    source: str = field(default="", compare=False)

    def time_us(self, op: str | None, size: float, n: int) -> float:
        if n <= 1:
            return 0.0
        bandwidth = size * bus_factor(op, n) / (self.busbw_gbps * 1e3) if self.busbw_gbps > 0 else math.inf
        return self.latency_us * latency_steps(op, n) + bandwidth


@dataclass(frozen=True)
class NetworkModel:
    """Links per (op, level); `default` per level answers ops without their own fit."""

    devices_per_node: int
    links: dict[tuple[str, str], Link] = field(default_factory=dict)
    source: str = ""
    device_memory: float | None = None  # bytes per device, where a network file states it

    def level(self, n: int) -> str:
        """The level of a group of n ranks packed from one node's first device (no placement known)."""
        return "intra_node" if n <= self.devices_per_node else "inter_node"

    def link(self, op: str | None, n: int, placement: Placement | None = None) -> Link | None:
        """The link timing op across n ranks at the placement's level (packed when None)."""
        level = placement.level if placement is not None else self.level(n)
        op = curve_op(op)
        for key in ((op or "", level), (FALLBACK_OP, level), ("*", level)):
            if key in self.links:
                return self.links[key]
        other = "inter_node" if level == "intra_node" else "intra_node"
        for key in ((op or "", other), (FALLBACK_OP, other), ("*", other)):
            if key in self.links:
                return self.links[key]
        return None

    def time_us(
        self, op: str | None, size: float, n: int, placement: Placement | None = None
    ) -> float | None:
        """The modelled transfer time, None when no level answers."""
        timed = self.timed(op, size, n, placement)
        return None if timed is None else timed[0]

    def timed(
        self, op: str | None, size: float, n: int, placement: Placement | None = None
    ) -> tuple[float, Link] | None:
        """The modelled transfer time and the link that bounds it, None when no level answers. An
        all-reduce spanning nodes with several ranks on each, on a described network (a file: its
        levels are links, not what a library achieved), takes the faster of the flat ring at the
        inter-node level and the two-level algorithm (`two_level_all_reduce_us`)."""
        link = self.link(op, n, placement)
        if link is None:
            return None
        flat = link.time_us(op, size, n)
        if curve_op(op) != "all_reduce" or link.source != FILE_SOURCE or placement is None:
            return flat, link
        if placement.nodes < 2 or placement.ranks_per_node < 2:
            return flat, link
        k, m = placement.ranks_per_node, placement.nodes
        intra = self.link(op, k, Placement(nodes=1, ranks_per_node=k))
        inter = self.link(op, m, Placement(nodes=m, ranks_per_node=1))
        if intra is None or inter is None:
            return flat, link
        two_level = two_level_all_reduce_us(intra, inter, size, k, m)
        return (two_level, inter) if two_level < flat else (flat, link)


def two_level_all_reduce_us(intra: Link, inter: Link, size: float, k: int, m: int) -> float:
    """A hierarchical all-reduce over m nodes of k ranks: a reduce-scatter inside each node, an
    all-reduce of each rank's 1/k across the nodes (every rank on its own network port), an
    all-gather inside each node."""
    return (
        intra.time_us("reduce_scatter", size, k)
        + inter.time_us("all_reduce", size / k, m)
        + intra.time_us("all_gather", size, k)
    )


def shipped_networks() -> dict[str, Path]:
    """The network descriptions tracehouse ships (pipeline/projection/networks/), by name."""
    folder = resources.files("tracehouse.pipeline.projection").joinpath("networks")
    return {
        item.name.removesuffix(".toml"): Path(str(item))
        for item in folder.iterdir()
        if item.name.endswith(".toml")
    }


def network_path(text: str | Path) -> Path:
    """A network description's file: a path, else the name of a shipped one (e.g. dgx-h100)."""
    path = Path(text)
    if path.is_file():
        return path
    shipped = shipped_networks()
    if str(text) in shipped:
        return shipped[str(text)]
    raise TracehouseError(
        f"{text}: no such network file, nor a shipped description ({', '.join(sorted(shipped))})"
    )


def load_network_file(path: Path) -> NetworkModel:
    """A network description (TOML): devices_per_node and [intra_node] / [inter_node] levels."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TracehouseError(f"{path}: cannot read the network file: {exc}") from exc
    links = {}
    for level in LEVELS:
        table = data.get(level)
        if table is None:
            continue
        try:
            link = Link(
                busbw_gbps=float(table["busbw_gbps"]),
                latency_us=float(table.get("latency_us", 0.0)),
                source=FILE_SOURCE,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TracehouseError(f"{path}: [{level}] needs busbw_gbps (GB/s) and latency_us (µs)") from exc
        if link.busbw_gbps <= 0 or link.latency_us < 0:
            raise TracehouseError(f"{path}: [{level}] busbw_gbps must be > 0 and latency_us >= 0")
        links[("*", level)] = link
    if not links:
        raise TracehouseError(f"{path}: no [intra_node] or [inter_node] level")
    per_node = data.get("devices_per_node", 8)
    if not isinstance(per_node, int) or per_node < 1:
        raise TracehouseError(f"{path}: devices_per_node must be a positive integer")
    memory = data.get("device_memory_gb")
    if memory is not None and (
        isinstance(memory, bool) or not isinstance(memory, int | float) or memory <= 0
    ):
        raise TracehouseError(f"{path}: device_memory_gb must be a positive number (GB per device)")
    device_memory = None if memory is None else float(memory) * 1e9
    return NetworkModel(
        devices_per_node=per_node, links=links, source=network_source(path), device_memory=device_memory
    )


def network_source(path: Path) -> str:
    """How a projection names its network file: a shipped description by its name (the same on
    every machine, and no install path in a shared report), any other by its path."""
    names = {file.resolve(): name for name, file in shipped_networks().items()}
    name = names.get(path.resolve())
    return f"{name}.toml (shipped with tracehouse)" if name else str(path)


def fit_link(points: list[tuple[str, float, int, float]]) -> Link | None:
    """Least squares of time = latency x steps + bytes x f / busbw over (op, bytes, n, time_us)."""
    rows = [(latency_steps(op, n), size * bus_factor(op, n) / 1e3, t) for op, size, n, t in points if n > 1]
    if not rows:
        return None
    a = np.array([[r[0], r[1]] for r in rows])
    y = np.array([r[2] for r in rows])
    solution = _nonnegative_lstsq(a, y)
    latency, inverse_bw = solution
    if inverse_bw <= 0:
        return None
    return Link(busbw_gbps=1.0 / inverse_bw, latency_us=latency)


def _nonnegative_lstsq(a: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Two-unknown least squares with both unknowns kept >= 0 (a zero column drops out). Points of
    one size cannot tell latency from bandwidth (the columns are collinear, every choice fits them
    as well): a tie, to float noise, goes to the first of both, bandwidth alone, latency alone, so
    the same points always give the same link whatever their order."""
    best = None
    for keep in ((0, 1), (1,), (0,)):
        cols = a[:, keep]
        if not np.any(cols):
            continue
        x, *_ = np.linalg.lstsq(cols, y, rcond=None)
        if np.any(x < 0):
            continue
        full = np.zeros(2)
        full[list(keep)] = x
        residual = float(np.sum((a @ full - y) ** 2))
        if best is None or residual < best[0] - 1e-9 * (best[0] + float(np.sum(y**2))):
            best = (residual, full)
    return (0.0, 0.0) if best is None else (float(best[1][0]), float(best[1][1]))


def calibrated_network(
    connection: duckdb.DuckDBPyConnection, *, study: str, run_id: str, devices_per_node: int
) -> NetworkModel:
    """Fit each op and level on `network_curves`, from the closest points it has: the run's own
    measured collective instances, else nccl-tests / `tracehouse calibrate` sweeps, else the
    measured instances of the study's other runs (other studies' are left out: another machine).
    A point whose nodes are unknown (no host for some rank) is left out: its level is unknown."""
    rows = connection.execute(
        """SELECT op, bytes, ranks, nodes, time_us,
                  CASE WHEN source <> 'trace' THEN 1 WHEN run_id = $run_id THEN 0 ELSE 2 END AS tier
           FROM network_curves
           WHERE time_us > 0 AND bytes > 0 AND ranks > 1 AND coalesce(in_place, false) = false
             AND nodes IS NOT NULL
             AND (source <> 'trace' OR study = $study)
           ORDER BY ALL""",
        {"study": study, "run_id": run_id},
    ).fetchall()
    grouped: dict[tuple[str, str], dict[int, list]] = {}
    for op, size, ranks, nodes, time_us, tier in rows:
        level = "intra_node" if nodes <= 1 else "inter_node"
        grouped.setdefault((op, level), {}).setdefault(tier, []).append(
            (op, float(size), int(ranks), float(time_us))
        )
    links = {}
    for key, tiers in grouped.items():
        for tier in sorted(tiers):
            if (link := fit_link(tiers[tier])) is not None:
                links[key] = replace(link, source=LINK_SOURCES[tier])
                break
    return NetworkModel(devices_per_node=devices_per_node, links=links, source="network_curves")
