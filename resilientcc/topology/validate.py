"""Structural checks of a topology, with errors that say what and where."""

from __future__ import annotations

import networkx as nx

from resilientcc.errors import TopologyError
from resilientcc.topology.model import GPU, LINK_KINDS, MAX_GPUS, NODE_KINDS, Topology
from resilientcc.units import MAX_TIME, check_bandwidth_range

__all__ = ["to_networkx", "validate"]


def to_networkx(topo: Topology) -> nx.MultiDiGraph:
    """The topology as a networkx multigraph; edge attribute ``index`` points into ``links``."""
    g = nx.MultiDiGraph()
    for n in topo.nodes:
        g.add_node(n.name, kind=n.kind, server=n.server)
    for i, lk in enumerate(topo.links):
        g.add_edge(lk.src, lk.dst, index=i, capacity=lk.capacity)
    return g


def validate(topo: Topology, where: str = "topology") -> Topology:
    """Check a topology and return it unchanged, or raise :class:`TopologyError`.

    Checks: unique node names and known kinds; GPU ranks are exactly ``0..p-1``;
    every link joins two existing nodes, with positive capacity and non-negative
    latency; failed nodes carry no links; and every GPU can send to and receive from
    every other GPU (no GPU is cut off).
    """
    seen: set[str] = set()
    for i, n in enumerate(topo.nodes):
        if not n.name:
            raise TopologyError(f"{where}: nodes[{i}] has an empty name")
        if n.name in seen:
            raise TopologyError(f"{where}: duplicate node name {n.name!r}")
        seen.add(n.name)
        if n.kind not in NODE_KINDS:
            raise TopologyError(
                f"{where}: node {n.name!r} has unknown kind {n.kind!r} (use gpu, nic, switch)"
            )
        if n.kind == GPU and n.rank is None:
            raise TopologyError(f"{where}: GPU {n.name!r} has no rank")
    ranks = sorted(g.rank for g in topo.nodes if g.kind == GPU and g.rank is not None)
    if not ranks:
        raise TopologyError(f"{where}: no GPUs")
    if len(ranks) > MAX_GPUS:
        raise TopologyError(f"{where}: {len(ranks):,} GPUs, more than {MAX_GPUS:,}")
    if ranks != list(range(len(ranks))):
        raise TopologyError(
            f"{where}: GPU ranks must be 0..{len(ranks) - 1} without gaps or repeats"
        )
    failed = {n.name for n in topo.nodes if n.failed}
    for i, lk in enumerate(topo.links):
        for end in (lk.src, lk.dst):
            if end not in seen:
                raise TopologyError(
                    f"{where}: link {i} ({lk.src} -> {lk.dst}) is dangling: no node {end!r}"
                )
            if end in failed:
                raise TopologyError(
                    f"{where}: link {i} ({lk.src} -> {lk.dst}) touches failed node {end!r}"
                )
        if lk.src == lk.dst:
            raise TopologyError(f"{where}: link {i} is a self-loop on {lk.src!r}")
        if lk.kind not in LINK_KINDS:
            raise TopologyError(
                f"{where}: link {i} ({lk.src} -> {lk.dst}) has unknown kind {lk.kind!r} "
                f"(use {', '.join(LINK_KINDS)})"
            )
        if lk.capacity <= 0:
            raise TopologyError(
                f"{where}: link {i} ({lk.src} -> {lk.dst}) has capacity {lk.capacity}, must be positive"
            )
        check_bandwidth_range(
            lk.capacity, f"{where}: link {i} ({lk.src} -> {lk.dst}) capacity", error=TopologyError
        )
        if lk.latency < 0:
            raise TopologyError(f"{where}: link {i} ({lk.src} -> {lk.dst}) has negative latency")
        if lk.latency > MAX_TIME:
            raise TopologyError(
                f"{where}: link {i} ({lk.src} -> {lk.dst}) has a latency over 1e6 s"
            )
    gpus = topo.gpus
    if len(gpus) > 1:
        g = nx.DiGraph()
        g.add_nodes_from(n.name for n in topo.nodes)
        g.add_edges_from((lk.src, lk.dst) for lk in topo.links)
        root = gpus[0].name
        fwd = nx.descendants(g, root)
        bwd = nx.ancestors(g, root)
        apart = [gpu for gpu in gpus[1:] if gpu.name not in fwd or gpu.name not in bwd]
        if apart:
            # name a GPU of the smaller side: the root's own side when it is the smaller
            side = len(gpus) - len(apart)
            if side < len(apart):
                gpu, peer = gpus[0], apart[0]
                how = "send to" if peer.name not in fwd else "receive from"
            else:
                gpu, peer, side = apart[0], gpus[0], len(apart)
                how = "receive from" if gpu.name not in fwd else "send to"
            more = f"; {side} GPUs are on its side of the cut" if side > 1 else ""
            raise TopologyError(
                f"{where}: GPU {gpu.name!r} (rank {gpu.rank}) is cut off: it cannot "
                f"{how} GPU {peer.name!r}{more}"
            )
    return topo
