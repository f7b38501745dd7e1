"""R2CC-AllReduce (R2CCL, arXiv 2512.25059): a global ring plus a tail around the straggler.

A server that lost a fraction ``X`` of its NIC bandwidth keeps ``(1 − X)·B``. The buffer
is split in two:

1. **Main part** ``(1 − X)·M``: a flat ring AllReduce over every GPU, one ring per NIC
   alive on every server (so the degraded server's surviving NICs each carry one ring).
   It takes the fault-free ring time ``T_ff``: the degraded server moves ``(1 − X)`` of
   the data on ``(1 − X)`` of its bandwidth.
2. **Tail** ``X·M``: all-reduced among the healthy servers only, on the rails the
   degraded server lost (which are idle in the main ring). The degraded server's
   contribution to the tail reaches a *helper* — the healthy server that owns each piece
   of the tail — which folds it in and returns the total, in ``K`` pipelined pieces.
   Inside each healthy server a tail chunk is reduced along a chain of its GPUs (as
   NCCL's rings do), not a binomial tree (``chain``).

The degraded server's links carry the main ring plus ``X·M`` each way, so
``T / T_ff = 1 + X·M / ((1 − X)·B·T_ff) = 1 + n·X / (2(n − 1)(1 − X))`` for ``n``
ranks of the ring (``n`` servers in the switch model): 1.571 at ``X = ½``, ``n = 8``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from resilientcc._gc import gc_paused
from resilientcc.errors import ScheduleError
from resilientcc.schedules._build import (
    Builder,
    common_rails,
    generator_args,
    nic_rings,
    server_view,
)
from resilientcc.schedules.direct import DirectPlan, default_pieces, direct_allreduce
from resilientcc.schedules.ir import Schedule
from resilientcc.topology.model import Topology

__all__ = ["r2cc_allreduce", "r2cc_model"]


def r2cc_model(n: int, x: Fraction) -> Fraction:
    """R2CC-AllReduce's time over the fault-free ring: ``1 + nX / (2(n−1)(1−X))``.

    >>> r2cc_model(8, Fraction(1, 2))
    Fraction(11, 7)
    """
    if n < 2 or not 0 <= x < 1:
        raise ScheduleError(f"r2cc model: needs n >= 2 and 0 <= X < 1, got n={n}, X={x}")
    return 1 + Fraction(n) * x / (2 * (n - 1) * (1 - x))


@gc_paused
def r2cc_allreduce(
    topology: Topology,
    size: Fraction,
    *,
    check: bool = True,
    pieces: int | None = None,
    chain: bool = True,
    **options: Any,
) -> Schedule:
    """R2CC-AllReduce: global ring on ``(1−X)`` of the buffer, helper-assisted tail on ``X``.

    Args:
        topology: the cluster; ``X`` is the largest bandwidth loss of any server.
        size: message size, in bytes (int, Fraction or float) or as text such as
            "1GiB" (:func:`~resilientcc.units.to_size`).
        check: run the exact executor before returning.
        pieces: pipeline pieces of the tail (default from the size).
        chain: the healthy servers reduce each tail chunk inside the server along a
            chain of their GPUs, as NCCL's rings do, instead of a binomial tree (see
            :func:`~resilientcc.schedules.direct.direct_allreduce`'s ``chain_reduce``).
            Every tail chunk of a healthy server leaves on a rail the straggler lost,
            so with one or two lost the trees' roots are one or two GPUs, which take
            every chunk's reductions one after another: 16 × 8 GPUs, 1 NIC lost, 1 GiB,
            1.152 × the fault-free ring with trees, 1.113 with chains (model 1.076).

    Examples:
        >>> from resilientcc.topology import hierarchical as cluster, fail_nics
        >>> s = r2cc_allreduce(fail_nics(cluster(4, 2), 0, 1), Fraction(2**20))
        >>> s.meta_get("tail_fraction")
        '1/2'
    """
    size = generator_args("r2cc_allreduce", size, options)
    servers = server_view(topology)
    full = max(sv.bandwidth for sv in servers)
    worst = min(servers, key=lambda sv: sv.bandwidth)
    x = 1 - worst.bandwidth / full if full > 0 else Fraction(0)
    healthy = [sv for sv in servers if sv.healthy]
    if len(servers) < 2 or x == 0 or not healthy:
        x = Fraction(0)
    nics = max(sv.nics for sv in servers)
    common = common_rails(servers)
    if not common:
        # no rail alive everywhere; on one server with every NIC down, no rail at all
        # (its rings stay on NVLink, where a channel is only a connection)
        common = list(worst.alive) or [0]
    lost = [c for c in range(nics) if c not in common] or list(range(nics))
    k = pieces if pieces is not None else min(12, 2 * default_pieces(size * x, len(servers)))
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ScheduleError(f"r2cc_allreduce: pieces must be a positive integer, got {k!r}")
    if not isinstance(chain, bool):
        raise ScheduleError(f"r2cc_allreduce: chain must be true or false, got {chain!r}")
    b = Builder("r2cc_allreduce", topology.num_ranks)
    b.order_by_release = True
    # 1. main part: one flat ring per common NIC
    nic_rings(b, servers, 1 - x, common)
    # 2. tail: owned by the healthy servers (the helpers), on the lost rails
    if x > 0:
        shares = {
            sv.index: (Fraction(1, len(healthy)) if sv.healthy else Fraction(0)) for sv in servers
        }
        plan = DirectPlan(servers, shares, healthy_rails=lost)
        # the tail's network transfers get their own connections (channel + K·i names the
        # same NIC as channel, see DEVELOPING.md), so they stream beside the main ring
        direct_allreduce(
            b,
            servers,
            x,
            k,
            plan,
            total_bytes=float(size),
            intra_channel=nics,
            rs_channel_offset=nics,
            ag_channel_offset=2 * nics,
            chain_reduce=chain,
        )
    meta = (
        ("generator", "r2cc_allreduce"),
        ("tail_fraction", str(x)),
        ("pieces", str(k)),
        *((("tail_reduce", "tree"),) if not chain else ()),
        ("ring_channels", ",".join(map(str, common))),
        ("tail_rails", ",".join(map(str, lost))),
        ("degraded_server", str(worst.index)),
    )
    return b.build(size, topology=topology.shape_fingerprint, meta=meta, check=check)
