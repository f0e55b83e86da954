"""Random replay graphs for the projection's Hypothesis tests: a DAG of nodes with measured times
and integer edge weights, and the replay graph built from it."""

from __future__ import annotations

from hypothesis import strategies as st
from tracehouse.pipeline.projection.graph import Cost, GraphBuilder, ReplayGraph, Segment


@st.composite
def dags(draw, max_nodes: int = 25):
    """A random DAG: nodes with measured times, edges from earlier to later nodes with weights."""
    n = draw(st.integers(2, max_nodes))
    measured = sorted(draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n)))
    edges = []
    for dst in range(1, n):
        for src in draw(st.sets(st.integers(0, dst - 1), max_size=3)):
            edges.append((src, dst, draw(st.integers(-50, 500))))
    return measured, edges


def build_dag(measured: list[int], edges: list[tuple[int, int, int]]) -> ReplayGraph:
    """The replay graph of a generated DAG: every edge a compute cost of its weight, on rank 0."""
    b = GraphBuilder()
    for t in measured:
        b.node(t, 0)
    for src, dst, w in edges:
        b.edge(src, dst, base=float(w), cost=Cost.COMPUTE_OTHER, kind=Segment.COMPUTE, label=f"{src}-{dst}")
    return b.freeze()
