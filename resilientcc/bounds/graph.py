"""The graph the LP works on: a topology, or its contraction by server islands.

Internal to :mod:`resilientcc.bounds`; vertices are integers, links keep exact
capacities, and ``is_gpu`` marks the vertices that hold data (a GPU, or a contracted
island that contains GPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from resilientcc.topology.model import GPU, Topology

__all__ = ["BoundGraph", "contract_islands", "from_topology", "island_map"]


@dataclass(frozen=True)
class BoundGraph:
    """A directed multigraph with exact capacities.

    Attributes:
        names: vertex names (``"s0.gpu3"``, or ``"server 0"`` for a contracted island).
        is_gpu: per vertex, whether it holds data (a rank or an island with ranks).
        gpu_count: per vertex, the number of GPUs (ranks) it stands for.
        server: per vertex, the server index or ``None``.
        src, dst: per link, vertex indices.
        cap: per link, exact capacity (bytes/s).
        contracted: whether vertices are server islands.
        origin: per link, its index in the topology's ``links`` (a contraction drops the
            links inside islands).
    """

    names: tuple[str, ...]
    is_gpu: tuple[bool, ...]
    gpu_count: tuple[int, ...]
    server: tuple[int | None, ...]
    src: tuple[int, ...]
    dst: tuple[int, ...]
    cap: tuple[Fraction, ...]
    contracted: bool = False
    origin: tuple[int, ...] = ()

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def m(self) -> int:
        return len(self.src)

    @property
    def gpu_vertices(self) -> tuple[int, ...]:
        return tuple(i for i, g in enumerate(self.is_gpu) if g)

    @property
    def relay_vertices(self) -> tuple[int, ...]:
        return tuple(i for i, g in enumerate(self.is_gpu) if not g)

    def cap_max(self) -> Fraction:
        return max(self.cap)

    def cap_float(self) -> np.ndarray:
        """Capacities in units of the largest capacity (floats in (0, 1])."""
        cm = self.cap_max()
        return np.array([float(c / cm) for c in self.cap], dtype=float)

    def int_caps(self) -> tuple[np.ndarray, bool]:
        """Integer capacities for scipy's max-flow (int32).

        Exact (``True``) when the capacities are commensurable with a small common unit:
        then min-cut values are exact. Otherwise rounded (``False``); the caller recomputes
        the exact capacity of any cut it finds, so the bound stays exact, only the choice of
        cut may be off by the rounding (relative ~1e-5).
        """
        den = 1
        for c in self.cap:
            den = den * c.denominator // math.gcd(den, c.denominator)
        ints = [int(c * den) for c in self.cap]
        g = 0
        for v in ints:
            g = math.gcd(g, v)
        ints = [v // g for v in ints]
        limit = (2**31 - 1) // max(1, self.m + 1)
        if max(ints) <= limit:
            return np.array(ints, dtype=np.int32), True
        cm = max(ints)
        scaled = [max(1, round(v * limit / cm)) for v in ints]
        return np.array(scaled, dtype=np.int32), False


def from_topology(topo: Topology) -> BoundGraph:
    """The topology as a :class:`BoundGraph` (failed nodes dropped: they have no links)."""
    nodes = [nd for nd in topo.nodes if not nd.failed]
    index = {nd.name: i for i, nd in enumerate(nodes)}
    return BoundGraph(
        names=tuple(nd.name for nd in nodes),
        is_gpu=tuple(nd.kind == GPU for nd in nodes),
        gpu_count=tuple(1 if nd.kind == GPU else 0 for nd in nodes),
        server=tuple(nd.server for nd in nodes),
        src=tuple(index[lk.src] for lk in topo.links),
        dst=tuple(index[lk.dst] for lk in topo.links),
        cap=tuple(lk.capacity for lk in topo.links),
        origin=tuple(range(len(topo.links))),
    )


def island_map(topo: Topology) -> list[int]:
    """For each vertex of :func:`from_topology`, its vertex in :func:`contract_islands`."""
    keys: dict[tuple[str, int | str], int] = {}
    out = []
    for nd in topo.nodes:
        if nd.failed:
            continue
        key: tuple[str, int | str] = ("s", nd.server) if nd.server is not None else ("n", nd.name)
        out.append(keys.setdefault(key, len(keys)))
    return out


def contract_islands(topo: Topology) -> BoundGraph:
    """Contract every server's island (its GPUs, NVSwitch, NICs: every node whose
    ``server`` is set) into one vertex ``"server s"``; links inside an island vanish,
    links between islands or to fabric switches are kept (parallel links stay parallel).

    Every cut or partition of the contracted graph is a cut or partition of the original
    graph that does not split an island, so the LP on it is a relaxation: a valid, possibly
    weaker, lower bound.
    """
    nodes = [nd for nd in topo.nodes if not nd.failed]
    keys: list[tuple[str, int | str]] = []
    key_of: dict[str, tuple[str, int | str]] = {}
    for nd in nodes:
        key: tuple[str, int | str] = ("s", nd.server) if nd.server is not None else ("n", nd.name)
        key_of[nd.name] = key
        if key not in keys:
            keys.append(key)
    index = {k: i for i, k in enumerate(keys)}
    gpu_count = [0] * len(keys)
    for nd in nodes:
        if nd.kind == GPU:
            gpu_count[index[key_of[nd.name]]] += 1
    src, dst, cap, origin = [], [], [], []
    for j, lk in enumerate(topo.links):
        a, b = index[key_of[lk.src]], index[key_of[lk.dst]]
        if a != b:
            src.append(a)
            dst.append(b)
            cap.append(lk.capacity)
            origin.append(j)
    return BoundGraph(
        names=tuple(f"server {k[1]}" if k[0] == "s" else str(k[1]) for k in keys),
        is_gpu=tuple(c > 0 for c in gpu_count),
        gpu_count=tuple(gpu_count),
        server=tuple(k[1] if k[0] == "s" and isinstance(k[1], int) else None for k in keys),
        src=tuple(src),
        dst=tuple(dst),
        cap=tuple(cap),
        contracted=True,
        origin=tuple(origin),
    )
