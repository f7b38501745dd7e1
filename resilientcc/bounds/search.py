"""Where every cut-generation search starts: the graph it runs on and its first constraints.

Shared by the LP bound (:mod:`resilientcc.bounds.lp`) and the bound that counts latency
(:mod:`resilientcc.bounds.latency`), so both search the same graph from the same pool.
"""

from __future__ import annotations

from fractions import Fraction

from resilientcc.bounds.graph import BoundGraph, contract_islands, from_topology, island_map
from resilientcc.bounds.result import BoundConstraint
from resilientcc.bounds.separation import cut_constraint, partition_labelings
from resilientcc.topology.model import Topology

__all__ = ["CONTRACT_ABOVE", "initial_pool", "lifted_labelings", "search_graph"]

#: ``contract=None`` contracts server islands when the graph has more vertices than this
CONTRACT_ABOVE = 500

#: a partition as a group label per vertex, with its description (or ``None``)
Labeling = tuple[list[int], str | None]


def initial_pool(g: BoundGraph) -> list[BoundConstraint]:
    """The tightest single-GPU-vertex cuts: one on what a vertex sends, one on what it
    receives (those without capacity are dropped).

    Examples:
        >>> from resilientcc.bounds.graph import from_topology
        >>> from resilientcc.topology import switch_model
        >>> pool = initial_pool(from_topology(switch_model([100, 50, 100])))
        >>> [(c.kind, c.capacity) for c in pool]
        [('cut', Fraction(50, 1)), ('cut', Fraction(50, 1))]
    """
    out_cap = dict.fromkeys(g.gpu_vertices, Fraction(0))
    in_cap = dict.fromkeys(g.gpu_vertices, Fraction(0))
    for e in range(g.m):
        if g.src[e] in out_cap and g.dst[e] != g.src[e]:
            out_cap[g.src[e]] += g.cap[e]
        if g.dst[e] in in_cap:
            in_cap[g.dst[e]] += g.cap[e]
    v_out = min(out_cap, key=lambda v: out_cap[v])
    v_in = min(in_cap, key=lambda v: in_cap[v])
    pool = [cut_constraint(g, {v_out}), cut_constraint(g, set(range(g.n)) - {v_in})]
    return [c for c in pool if c.capacity > 0]


def search_graph(
    topology: Topology, contract: bool | None
) -> tuple[BoundGraph, bool, list[Labeling] | None]:
    """The graph a search runs on, whether it is contracted, and the partitions lifted
    from the contracted graph that start a search on the full graph (``None`` when the
    graph is contracted or has fewer than two servers).

    ``contract`` ``None``: contract the NVLink islands above :data:`CONTRACT_ABOVE`
    vertices; a contraction left with fewer than two GPU vertices falls back to the full
    graph.
    """
    full_n = sum(1 for nd in topology.nodes if not nd.failed)
    if contract is None:
        contract = full_n > CONTRACT_ABOVE and any(nd.server is not None for nd in topology.nodes)
    g = contract_islands(topology) if contract else from_topology(topology)
    if contract and len(g.gpu_vertices) < 2:
        g, contract = from_topology(topology), False
    extra = None if contract or len(topology.servers) < 2 else lifted_labelings(topology)
    return g, contract, extra


def lifted_labelings(topo: Topology) -> list[Labeling]:
    """Partitions found on the contracted graph, lifted to the original vertices (each
    constraint of the contracted graph is one of the original graph)."""
    gc = contract_islands(topo)
    if len(gc.gpu_vertices) < 2:
        return []
    vmap = island_map(topo)
    return [
        ([lab[vmap[v]] for v in range(len(vmap))], d)
        for lab, d in partition_labelings(gc, gc.cap_float())
    ]
