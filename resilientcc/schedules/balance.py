"""R2CCL's *Balance*: the flat ring kept, each server's traffic spread over its NICs by bandwidth.

The ring of :func:`resilientcc.schedules.ring.ring` sends every server's outgoing
inter-server hop on one NIC per channel, so when NICs die the naive PXN remap puts
two channels on one surviving NIC and the whole ring runs at that NIC's pace.
Balance instead splits each inter-server hop ``s → t`` over the NICs alive on both
ends (a rail must be alive on both servers), in proportion to
``min(egress of s's NIC k, ingress of t's NIC k)``.

Construction (exact): each hop's split is a partition of the unit interval into NIC
intervals; the common refinement of all hops' partitions gives the *pieces* (logical
channels). Piece ``j`` is a ring over all GPUs carrying ``weights[j]`` of the buffer
(``p`` chunks of ``weights[j]/p`` each, exact fractions); its hop ``s → t`` uses the NIC
whose interval of that hop's partition contains the piece. Each piece's ring enters
server ``t`` at the GPU whose PCIe NIC is its entry NIC. Fault-free, every partition is
``K`` equal intervals and Balance is exactly :func:`~resilientcc.schedules.ring.ring`.
With one server losing ``k`` of ``K`` equal NICs there are at most ``2K − k − 1`` pieces,
every surviving NIC of the degraded server carries ``1/(K−k)`` of its hop and the ring
time is ``1/(1 − X)`` of the fault-free ring (``X = k/K``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from resilientcc._gc import gc_paused
from resilientcc.errors import InputError
from resilientcc.schedules.ir import Schedule
from resilientcc.schedules.ring import (
    ServerLayout,
    maybe_check,
    nic_capacity,
    ring_allreduce,
    server_layouts,
)
from resilientcc.topology.model import Topology
from resilientcc.units import to_size

__all__ = ["BalanceRings", "balance", "balance_rings", "common_rail_capacities", "hop_partition"]


def common_rail_capacities(
    topology: Topology, layouts: Mapping[int, ServerLayout], src_server: int, dst_server: int
) -> list[tuple[int, Fraction]]:
    """The rails alive on both servers, each with ``min(egress at src, ingress at dst)``
    (bytes/s), in the source's NIC order."""
    alive = set(layouts[dst_server].alive)
    return [
        (
            k,
            min(
                nic_capacity(topology, src_server, k, "out"),
                nic_capacity(topology, dst_server, k, "in"),
            ),
        )
        for k in layouts[src_server].alive
        if k in alive
    ]


def hop_partition(
    topology: Topology, src_server: int, dst_server: int
) -> list[tuple[int, Fraction]]:
    """How Balance splits the hop ``src_server → dst_server``: ``[(nic, fraction), ...]``.

    The NICs alive on both servers, weighted by ``min(egress at src, ingress at dst)``;
    if no NIC index is alive on both, the source's alive NICs weighted by egress (the
    simulator then routes as it can).

    Examples:
        >>> from resilientcc.topology import hierarchical, fail_nics
        >>> t = fail_nics(hierarchical(2, 8, 4), 0, 1)
        >>> [(k, str(f)) for k, f in hop_partition(t, 0, 1)]
        [(1, '1/3'), (2, '1/3'), (3, '1/3')]
    """
    lays = server_layouts(topology)
    la = lays[src_server]
    common = common_rail_capacities(topology, lays, src_server, dst_server)
    if common:
        nics = [k for k, _ in common]
        w = [wk for _, wk in common]
    else:
        nics = list(la.alive)
        w = [nic_capacity(topology, src_server, k, "out") for k in nics]
    total = sum(w, Fraction(0))
    if not nics or total <= 0:
        raise InputError(
            f"balance: server {src_server} has no usable NIC towards server {dst_server}"
        )
    return [(k, wk / total) for k, wk in zip(nics, w, strict=True) if wk > 0]


def _server_orders(lay: ServerLayout, nics: list[tuple[int, int]]) -> list[list[int]]:
    """In-server ring orders, one per piece, from its (entry NIC, exit NIC).

    The first GPU is the entry NIC's GPU; the last is the exit NIC's GPU shifted by an
    offset ``o`` (the same for every piece of this server, so that pieces leaving on the
    same NIC share one FIFO connection and take turns on it instead of sharing it
    max-min fairly). ``o = −1`` (the ring's rotation) is tried first, then 0, 1, ...;
    the first offset where no piece's last GPU equals its first wins.
    """
    locs = list(lay.locals)
    g = len(locs)

    def gpu(k: int) -> int:
        x = lay.gpu_of_nic(k)
        return locs.index(x) if x is not None else 0

    firsts = [gpu(ki) for ki, _ in nics]
    for off in [-1, *range(g - 1)]:
        lasts = [(gpu(ko) + off) % g for _, ko in nics]
        if all(a != b for a, b in zip(firsts, lasts, strict=True)) or g == 1:
            break
    else:  # pragma: no cover - needs a pathological NIC attachment
        lasts = [(a - 1) % g for a in firsts]
    out = []
    for a, b in zip(firsts, lasts, strict=True):
        mid = [(a + i) % g for i in range(1, g) if (a + i) % g != b]
        seq = [a, *mid, b] if g > 1 else [a]
        out.append([lay.ranks[i] for i in seq])
    return out


@dataclass(frozen=True)
class BalanceRings:
    """Balance's rings: one per piece (logical channel) of the buffer.

    Attributes:
        weights: fraction of the buffer each piece carries (sum 1).
        orders: per piece, the ring as a sequence of all ``p`` ranks.
        channel_of: ``(piece, src_rank, dst_rank) -> channel`` of a hop.
    """

    weights: tuple[Fraction, ...]
    orders: tuple[tuple[int, ...], ...]
    channel_of: Callable[[int, int, int], int]


def balance_rings(topology: Topology, server_order: Sequence[int] | None = None) -> BalanceRings:
    """Balance's pieces, ring orders and NIC choices (a topology with a network).

    Args:
        topology: the cluster with its failures.
        server_order: the servers in the order the rings visit them (default: by index,
            as R2CCL's Balance; :func:`~resilientcc.schedules.ring_order.best_server_order`
            picks one with no needlessly narrow hop).

    Examples:
        >>> from resilientcc.topology import hierarchical, fail_nics
        >>> br = balance_rings(fail_nics(hierarchical(2, 8), 0, 4))
        >>> len(br.weights), len(br.orders[0])
        (4, 16)
    """
    layouts = server_layouts(topology)
    servers = sorted(layouts)
    if server_order is not None:
        if sorted(server_order) != servers:
            raise InputError(
                f"balance: server_order must list every server once, got {list(server_order)}"
            )
        servers = list(server_order)
    server_of = {r: s for s, lay in layouts.items() for r in lay.ranks}
    n_srv = len(servers)
    # one partition per hop (s -> next server), as cumulative intervals
    hops: dict[int, list[tuple[int, Fraction, Fraction]]] = {}
    cuts: set[Fraction] = set()
    for i, s in enumerate(servers):
        t = servers[(i + 1) % n_srv]
        pos = Fraction(0)
        ivs = []
        for k, f in hop_partition(topology, s, t):
            ivs.append((k, pos, pos + f))
            pos += f
            cuts.add(pos)
        hops[s] = ivs
    bounds = sorted({Fraction(0), *cuts, Fraction(1)})
    pieces = list(itertools.pairwise(bounds))
    weights = [b - a for a, b in pieces]

    def nic_of(s: int, j: int) -> int:
        a, b = pieces[j]
        for k, lo, hi in hops[s]:
            if lo <= a and b <= hi:
                return k
        raise AssertionError("refinement covers every piece")  # pragma: no cover

    prev = {servers[(i + 1) % n_srv]: s for i, s in enumerate(servers)}
    per_server = {
        t: _server_orders(
            layouts[t], [(nic_of(prev[t], j), nic_of(t, j)) for j in range(len(pieces))]
        )
        for t in servers
    }
    orders = [[r for t in servers for r in per_server[t][j]] for j in range(len(pieces))]

    def channel_of(j: int, src: int, dst: int) -> int:
        s = server_of[src]
        return j if s == server_of[dst] else nic_of(s, j)

    return BalanceRings(tuple(weights), tuple(tuple(o) for o in orders), channel_of)


@gc_paused
def balance(topology: Topology, size: Fraction, *, check: bool = True, **options: Any) -> Schedule:
    """R2CCL's Balance AllReduce: the flat ring, each hop split over NICs by bandwidth.

    Args:
        topology: the cluster with its failures.
        size: message size, in bytes (int, Fraction or float) or as text such as
            "1GiB" (:func:`~resilientcc.units.to_size`).
        check: run the exact executor (skipped above ``ring.CHECK_CAP``).

    Examples:
        >>> from resilientcc.topology import hierarchical, fail_nics
        >>> s = balance(fail_nics(hierarchical(2, 8), 0, 4), Fraction(2**20))
        >>> s.meta_get("pieces"), len(s.chunks)
        ('4', 64)
    """
    if options:
        raise InputError(f"balance: unknown option(s) {', '.join(sorted(options))}")
    size = to_size(size)
    layouts = server_layouts(topology)
    has_network = len(layouts) > 1 and all(lay.nics for lay in layouts.values())
    if not has_network:
        k_max = max((len(lay.nics) for lay in layouts.values()), default=0)
        from resilientcc.schedules.ring import ring

        sched = ring(topology, size, check=False, channels=max(1, k_max))
        return maybe_check(
            Schedule(
                "balance",
                sched.ranks,
                sched.size,
                sched.chunks,
                sched.transfers,
                topology=sched.topology,
                meta=(("pieces", str(max(1, k_max))),),
            ),
            check,
        )
    br = balance_rings(topology)
    weights = list(br.weights)
    sched = ring_allreduce(
        "balance",
        topology,
        size,
        weights,
        br.orders,
        br.channel_of,
        meta=(("pieces", str(len(weights))), ("weights", ",".join(map(str, weights)))),
    )
    return maybe_check(sched, check)
