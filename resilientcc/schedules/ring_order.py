"""The order of the servers around a ring, chosen so that no hop is narrower than it must be.

A ring's hop ``s → t`` between servers can only use the rails alive on both ends (the
fabric is rail-only), so two degraded servers that lost *different* NICs are a narrow
hop when they sit next to each other: servers that lost NIC 0 and NIC 3 share 6 of 8
rails, and a hop between them runs at 6/8 of a healthy one even though each server
keeps 7/8. Every server sends on exactly one hop of a ring, so a ring can be no faster
than its slowest server allows (:func:`server_limit`); the order decides whether it is
slower still.

:func:`hop_throughput` is the capacity of one hop (the sum of what Balance splits it by,
:func:`~resilientcc.schedules.balance.hop_partition`); :func:`best_server_order` picks
the order whose narrowest hop is widest: a healthy server next to a degraded one costs
nothing beyond the degraded server's own bandwidth, so the healthy servers go into the
narrowest gaps between degraded ones. It is exact (every order of the degraded servers
is tried) up to :data:`EXACT_MAX_DEGRADED` degraded servers and greedy above, and never
narrower than the servers' own order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from fractions import Fraction

from resilientcc.schedules.balance import common_rail_capacities
from resilientcc.schedules.ring import nic_capacity, server_layouts
from resilientcc.topology.model import Topology

__all__ = [
    "EXACT_MAX_DEGRADED",
    "best_server_order",
    "hop_throughput",
    "order_throughput",
    "server_limit",
]

#: up to this many degraded servers every cyclic order of them is tried (6! = 720)
EXACT_MAX_DEGRADED = 7


def hop_throughput(topology: Topology, src: int, dst: int) -> Fraction:
    """Capacity of the hop ``src → dst``: over the rails alive on both servers, the
    smaller of the source NIC's egress and the destination NIC's ingress (bytes/s).

    Examples:
        >>> from resilientcc.topology import hierarchical, apply_fail_specs
        >>> t = apply_fail_specs(hierarchical(3, 8), ["0:nic0", "1:nic3"])
        >>> hop_throughput(t, 0, 1) / hop_throughput(t, 2, 0)
        Fraction(6, 7)
    """
    return _Hops(topology)(src, dst)


class _Hops:
    """:func:`hop_throughput` with the layouts read once and every hop kept."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.layouts = server_layouts(topology)
        self.memo: dict[tuple[int, int], Fraction] = {}

    def __call__(self, src: int, dst: int) -> Fraction:
        key = (src, dst)
        if key not in self.memo:
            common = common_rail_capacities(self.topology, self.layouts, src, dst)
            self.memo[key] = sum((w for _, w in common), Fraction(0))
        return self.memo[key]

    def limit(self, server: int) -> Fraction:
        """:func:`server_limit`."""
        t, alive = self.topology, self.layouts[server].alive
        out = sum((nic_capacity(t, server, k, "out") for k in alive), Fraction(0))
        inn = sum((nic_capacity(t, server, k, "in") for k in alive), Fraction(0))
        return min(out, inn)


def server_limit(topology: Topology, server: int) -> Fraction:
    """The most any hop into or out of ``server`` can carry: the smaller of its NICs'
    total egress and total ingress (bytes/s)."""
    return _Hops(topology).limit(server)


def order_throughput(topology: Topology, order: Sequence[int]) -> Fraction:
    """The narrowest hop of the ring that visits the servers in ``order`` (bytes/s)."""
    return _narrowest(_Hops(topology), order)


def _narrowest(hop: _Hops, order: Sequence[int]) -> Fraction:
    n = len(order)
    if n < 2:
        return Fraction(0)
    return min(hop(order[i], order[(i + 1) % n]) for i in range(n))


def _cycle_with_gaps(hop: _Hops, degraded: Sequence[int], healthy: Sequence[int]) -> list[int]:
    """Put the degraded servers in ``degraded``'s cyclic order and fill the narrowest gaps
    between consecutive ones with healthy servers (the spare ones go into the narrowest)."""
    d = len(degraded)
    if not healthy:
        return list(degraded)
    gaps = sorted(range(d), key=lambda i: hop(degraded[i], degraded[(i + 1) % d]))
    fill: dict[int, list[int]] = {i: [] for i in range(d)}
    spare = list(healthy)
    for i in gaps:
        if not spare:
            break
        fill[i].append(spare.pop(0))
    fill[gaps[0]].extend(spare)
    out: list[int] = []
    for i in range(d):
        out.append(degraded[i])
        out.extend(fill[i])
    return out


def best_server_order(topology: Topology, healthy: Sequence[int] | None = None) -> list[int]:
    """The order of the servers around a ring whose narrowest hop is widest.

    Args:
        topology: the cluster (two servers or more).
        healthy: the servers that lost nothing (default: those with as many alive NICs
            and as much bandwidth, :func:`server_limit`, as the best server).

    Ties keep the servers' own order where they can (the identity order when nothing is
    degraded), so a cluster without failures gets the ring it always had.

    Examples:
        >>> from resilientcc.topology import hierarchical, apply_fail_specs
        >>> t = apply_fail_specs(hierarchical(4, 8), ["0:nic0", "1:nic3"])
        >>> best_server_order(t)
        [0, 2, 1, 3]
        >>> order_throughput(t, [0, 2, 1, 3]) > order_throughput(t, [0, 1, 2, 3])
        True
    """
    hop = _Hops(topology)
    lays = hop.layouts
    servers = sorted(lays)
    if healthy is None:
        limits = {s: hop.limit(s) for s in servers}
        full = max(limits.values())
        widest = max(len(lays[s].alive) for s in servers)
        healthy = [s for s in servers if limits[s] == full and len(lays[s].alive) == widest]
    fine = set(healthy)
    well = [s for s in servers if s in fine]
    degraded = [s for s in servers if s not in fine]
    if len(degraded) <= 1:
        return servers
    # never narrower than the servers' own order (Balance's)
    best: list[int] = servers
    best_key = (_narrowest(hop, servers), 0)
    candidates: Iterator[list[int]]
    if len(degraded) <= EXACT_MAX_DEGRADED:
        first, rest = degraded[0], degraded[1:]
        candidates = ([first, *perm] for perm in itertools.permutations(rest))
    else:
        candidates = iter([_greedy(hop, degraded)])
    for cand in candidates:
        order = _cycle_with_gaps(hop, cand, well)
        key = (_narrowest(hop, order), -_displacement(order))
        if key > best_key:
            best, best_key = order, key
    return best


def _displacement(order: Sequence[int]) -> int:
    """How far ``order`` is from sorted (ties go to the order closest to the identity)."""
    return sum(abs(i - s) for i, s in enumerate(order))


def _greedy(hop: _Hops, degraded: Sequence[int]) -> list[int]:
    """Degraded servers in a chain, each followed by the one it has the widest hop to."""
    left = list(degraded[1:])
    chain = [degraded[0]]
    while left:
        nxt = max(left, key=lambda s: hop(chain[-1], s))
        chain.append(nxt)
        left.remove(nxt)
    return chain
