"""Balance's rings with the servers in the order whose narrowest hop is widest.

R2CCL's Balance (:mod:`~resilientcc.schedules.balance`) keeps NCCL's ring and splits
every server-to-server hop over the NICs alive on both ends, by bandwidth. Its servers
are in index order, so two degraded servers that lost different NICs can sit next to
each other, and the hop between them runs on the rails both kept: servers that lost
NIC 0 and NIC 3 share 6 of 8 rails. Here the servers are visited in
:func:`~resilientcc.schedules.ring_order.best_server_order`, which puts healthy servers
between degraded ones that differ; the ring then runs at the pace of its slowest
server, not of its worst pair (6 servers, NICs 0, 3 and 7 lost on three and every NIC
at 7/8 on a fourth, 256 MiB: the narrowest hop 49/64 of a healthy one instead of 3/4).

OptCC uses these rings where several degraded servers differ and its own schedules
would pay for the difference (:func:`~resilientcc.schedules.optcc.optcc`);
:func:`rings_estimate` is the cost model it decides with.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from resilientcc.schedules.balance import balance_rings
from resilientcc.schedules.ir import Schedule
from resilientcc.schedules.ring import maybe_check, ring_allreduce
from resilientcc.schedules.ring_order import best_server_order, order_throughput
from resilientcc.topology.model import Topology

__all__ = ["ordered_rings", "rings_estimate", "rings_latency"]


def rings_latency(topology: Topology) -> float:
    """The latency a ring over every GPU pays along its ``2(p − 1)`` steps (seconds).

    Each pass crosses every server once over the network and its other GPUs over NVLink:
    ``2 · (N · α_net + (p − N) · α_nvlink)``, with each ``α`` the least route latency of
    that kind (:func:`~resilientcc.bounds.latency.route_latency_floor`).

    Examples:
        >>> from resilientcc.topology import hierarchical
        >>> round(rings_latency(hierarchical(4, 8)) * 1e6, 1)
        302.4
    """
    from resilientcc.bounds.latency import route_latency_floor

    floors = route_latency_floor(topology)
    by_kind: dict[str, float] = {}
    for lk, x in zip(topology.links, floors, strict=True):
        if lk.kind in ("nvlink", "network"):
            by_kind[lk.kind] = min(by_kind.get(lk.kind, float("inf")), float(x))
    p = topology.num_ranks
    n = len(topology.servers)
    net = by_kind.get("network", 0.0)
    nvl = by_kind.get("nvlink", net)
    return 2 * (n * net + (p - n) * nvl)


def rings_estimate(
    topology: Topology,
    size: Fraction,
    bound: Fraction,
    *,
    latency: bool = True,
    order: Sequence[int] | None = None,
) -> float:
    """Estimated time of :func:`ordered_rings` over ``bound`` (seconds, any lower bound).

    The rings' bytes take ``2(p − 1)/p · M`` over the narrowest hop
    (:func:`~resilientcc.schedules.ring_order.order_throughput`); where the latency of
    their steps (:func:`rings_latency`) is longer, about half the bytes' time comes on
    top of it: ``max(T_bytes, T_latency + T_bytes / 2)``. It came within 6 % of the
    simulated rings at 16, 64 and 256 MiB on 6, 8 and 12 servers. With ``latency``
    false, only the bytes' time; ``order`` is the rings' server order if already known
    (default :func:`~resilientcc.schedules.ring_order.best_server_order`).

    Examples:
        >>> from resilientcc.topology import hierarchical, apply_fail_specs
        >>> t = apply_fail_specs(hierarchical(6, 8), ["0:nic0", "1:nic3"])
        >>> round(rings_estimate(t, Fraction(2**28), Fraction(1)) * 1e3, 3)  # ms
        1.502
    """
    if order is None:
        order = best_server_order(topology)
    thr = order_throughput(topology, order)
    if thr <= 0 or bound <= 0:
        return float("inf")
    p = topology.num_ranks
    t_bytes = float(Fraction(2 * (p - 1), p) * size / thr)
    t = max(t_bytes, rings_latency(topology) + t_bytes / 2) if latency else t_bytes
    return t / float(bound)


def ordered_rings(
    topology: Topology,
    size: Fraction,
    *,
    check: bool = True,
    order: Sequence[int] | None = None,
) -> Schedule:
    """Balance's rings over the servers in :func:`~resilientcc.schedules.ring_order.best_server_order`.

    Args:
        topology: the cluster with its failures (a network, every server with a NIC).
        size: message size in bytes.
        check: run the exact executor (skipped above ``ring.CHECK_CAP``).
        order: the servers' order if already known (default
            :func:`~resilientcc.schedules.ring_order.best_server_order`).

    Examples:
        >>> from resilientcc.topology import hierarchical, apply_fail_specs
        >>> t = apply_fail_specs(hierarchical(4, 8), ["0:nic0", "1:nic3"])
        >>> ordered_rings(t, Fraction(2**20)).meta_get("server_order")
        '0,2,1,3'
    """
    if order is None:
        order = best_server_order(topology)
    br = balance_rings(topology, order)
    weights = list(br.weights)
    sched = ring_allreduce(
        "ordered_rings",
        topology,
        size,
        weights,
        br.orders,
        br.channel_of,
        meta=(
            ("pieces", str(len(weights))),
            ("server_order", ",".join(map(str, order))),
        ),
    )
    return maybe_check(sched, check)
