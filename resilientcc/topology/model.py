"""The topology data model: GPUs, NICs and switches joined by directed links.

A :class:`Topology` is immutable. Capacities are exact :class:`~fractions.Fraction`
bytes per second and latencies exact seconds, so bounds computed from them are exact.
Edits (failures) return new topologies; see :mod:`resilientcc.topology.failures`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property

__all__ = [
    "GPU",
    "LINK_KINDS",
    "MAX_GPUS",
    "NIC",
    "NODE_KINDS",
    "SWITCH",
    "Link",
    "Node",
    "Topology",
]

GPU = "gpu"
NIC = "nic"
SWITCH = "switch"
NODE_KINDS = (GPU, NIC, SWITCH)
#: the most GPUs a topology (and a schedule) may have: 131,072, beyond any cluster the
#: tools are made for; a file or an option asking for more would make them allocate per rank
MAX_GPUS = 2**17
#: link kinds; ``"network"`` links are the ones a server's NIC bandwidth is summed over
LINK_KINDS = ("nvlink", "pcie", "network", "custom")


@dataclass(frozen=True)
class Node:
    """A vertex of the topology.

    Attributes:
        name: unique name, e.g. ``"s0.gpu3"``, ``"s0.nic3"``, ``"rail3"``.
        kind: ``"gpu"`` (a rank, holds data), ``"nic"`` or ``"switch"``.
        server: index of the server the node belongs to, or ``None`` (fabric switches).
        local: index of the GPU or NIC inside its server, or ``None``.
        rank: the rank of a GPU (``0 .. p-1``), ``None`` for other kinds.
        failed: a failed NIC keeps its node but has no links left.
    """

    name: str
    kind: str
    server: int | None = None
    local: int | None = None
    rank: int | None = None
    failed: bool = False


@dataclass(frozen=True)
class Link:
    """A directed link; a full-duplex cable is two links.

    Attributes:
        src, dst: node names.
        capacity: bytes per second (exact).
        latency: seconds (exact).
        kind: ``"nvlink"``, ``"pcie"``, ``"network"`` or ``"custom"``; informational.
    """

    src: str
    dst: str
    capacity: Fraction
    latency: Fraction = Fraction(0)
    kind: str = "custom"


@dataclass(frozen=True)
class Topology:
    """A directed multigraph of GPUs, NICs and switches.

    Build one with :func:`resilientcc.topology.hierarchical`,
    :func:`resilientcc.topology.switch_model` or load one from JSON with
    :func:`resilientcc.topology.load_topology`. Ranks are the GPUs, numbered by
    their ``rank`` attribute.

    Attributes:
        nodes: all vertices.
        links: all directed links.
        name: a short human-readable description.
        params: builder parameters as ``(key, value)`` string pairs (informational,
            used by generators, e.g. ``("fabric", "rail")``).
        failures: human-readable records of the failure edits applied, in order.
    """

    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    name: str = "custom"
    params: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    failures: tuple[str, ...] = field(default_factory=tuple)

    # ----- derived views (cached; the dataclass is frozen so they never go stale)
    @cached_property
    def node_by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def gpus(self) -> tuple[Node, ...]:
        """GPU nodes sorted by rank."""
        return tuple(sorted((n for n in self.nodes if n.kind == GPU), key=lambda n: n.rank or 0))

    @property
    def num_ranks(self) -> int:
        return len(self.gpus)

    @cached_property
    def servers(self) -> tuple[int, ...]:
        """Sorted server indices that hold at least one GPU."""
        return tuple(sorted({g.server for g in self.gpus if g.server is not None}))

    @cached_property
    def gpus_of_server(self) -> dict[int, tuple[Node, ...]]:
        out: dict[int, list[Node]] = {}
        for g in self.gpus:
            if g.server is not None:
                out.setdefault(g.server, []).append(g)
        return {s: tuple(v) for s, v in out.items()}

    @cached_property
    def nics_of_server(self) -> dict[int, tuple[Node, ...]]:
        """All NICs (failed ones included) of each server, sorted by local index."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            if n.kind == NIC and n.server is not None:
                out.setdefault(n.server, []).append(n)
        return {s: tuple(sorted(v, key=lambda n: n.local or 0)) for s, v in out.items()}

    @cached_property
    def out_links(self) -> dict[str, tuple[int, ...]]:
        """Indices into :attr:`links` of the links leaving each node."""
        out: dict[str, list[int]] = {n.name: [] for n in self.nodes}
        for i, link in enumerate(self.links):
            out[link.src].append(i)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def in_links(self) -> dict[str, tuple[int, ...]]:
        """Indices into :attr:`links` of the links entering each node."""
        out: dict[str, list[int]] = {n.name: [] for n in self.nodes}
        for i, link in enumerate(self.links):
            out[link.dst].append(i)
        return {k: tuple(v) for k, v in out.items()}

    def param(self, key: str, default: str | None = None) -> str | None:
        """Look up a builder parameter by key."""
        for k, v in self.params:
            if k == key:
                return v
        return default

    def node(self, name: str) -> Node:
        try:
            return self.node_by_name[name]
        except KeyError:
            from resilientcc.errors import TopologyError

            raise TopologyError(f"unknown node {name!r}") from None

    def gpu(self, rank: int) -> Node:
        """The GPU node of a rank."""
        return self.gpus[rank]

    def alive_nics(self, server: int) -> tuple[Node, ...]:
        return tuple(n for n in self.nics_of_server.get(server, ()) if not n.failed)

    def iter_links(self, kind: str | None = None) -> Iterator[Link]:
        return (lnk for lnk in self.links if kind is None or lnk.kind == kind)

    def server_egress(self, server: int) -> Fraction:
        """Total capacity of network links leaving the server's NICs (bytes/s)."""
        names = {n.name for n in self.nics_of_server.get(server, ())}
        return sum(
            (lnk.capacity for lnk in self.links if lnk.src in names and lnk.kind == "network"),
            Fraction(0),
        )

    def server_ingress(self, server: int) -> Fraction:
        """Total capacity of network links entering the server's NICs (bytes/s)."""
        names = {n.name for n in self.nics_of_server.get(server, ())}
        return sum(
            (lnk.capacity for lnk in self.links if lnk.dst in names and lnk.kind == "network"),
            Fraction(0),
        )

    @cached_property
    def fingerprint(self) -> str:
        """A short hash of the graph (nodes, links, capacities), used to tie schedules to it."""
        payload = json.dumps(
            [
                [(n.name, n.kind, n.server, n.local, n.rank, n.failed) for n in self.nodes],
                [(lk.src, lk.dst, str(lk.capacity), str(lk.latency)) for lk in self.links],
            ],
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @cached_property
    def shape_fingerprint(self) -> str:
        """Hash of the GPU set only (ranks, servers): schedules depend on this much."""
        payload = json.dumps([(g.name, g.rank, g.server) for g in self.gpus])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]
