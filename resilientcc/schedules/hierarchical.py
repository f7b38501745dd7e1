"""Hierarchical AllReduce: intra-server reduce-scatter, per-rail inter-server ring, all-gather.

Stages (``G`` GPUs per server, ``N`` servers):

1. **Intra-server reduce-scatter** over NVLink (a ring over the server's GPUs): GPU ``g``
   ends with the server's partial sum of part ``g`` (``1/G`` of the buffer).
2. **Inter-server ring per rail**: GPU ``g`` of every server runs a ring AllReduce of
   part ``g`` (split into ``N`` chunks) with the GPUs ``g`` of the other servers, on the
   channel of its own NIC (a dead NIC is remapped by the simulator, NCCL-like PXN).
3. **Intra-server all-gather** over NVLink.

The schedule is bandwidth-oblivious: a degraded server slows every rail whose NIC it lost.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from resilientcc._gc import gc_paused
from resilientcc.errors import ScheduleError
from resilientcc.schedules._build import Builder, generator_args, server_view
from resilientcc.schedules.ir import Schedule
from resilientcc.topology.model import Topology

__all__ = ["hierarchical"]


@gc_paused
def hierarchical(
    topology: Topology, size: Fraction, *, check: bool = True, **options: Any
) -> Schedule:
    """Hierarchical AllReduce (intra RS, per-rail ring, intra AG); see the module docs.

    Args:
        topology: the cluster (every server must have the same number of GPUs).
        size: message size, in bytes (int, Fraction or float) or as text such as
            "1GiB" (:func:`~resilientcc.units.to_size`).
        check: run the exact executor before returning.

    Examples:
        >>> from resilientcc.topology import hierarchical as cluster
        >>> s = hierarchical(cluster(2, 4), Fraction(2**20))
        >>> s.ranks, len(s.chunks)
        (8, 8)
    """
    size = generator_args("hierarchical", size, options)
    servers = server_view(topology)
    g = len(servers[0].ranks)
    if any(len(sv.ranks) != g for sv in servers):
        raise ScheduleError("hierarchical: every server must have the same number of GPUs")
    n = len(servers)
    b = Builder("hierarchical", topology.num_ranks)
    # chunk (part q, sub-chunk i): part q is reduced by GPU q, sub-chunk i owned by server i
    chunk = [[b.chunk(Fraction(1, g * n)) for _ in range(n)] for _ in range(g)]
    intra = [list(sv.ranks) for sv in servers]
    if g > 1:
        # ring RS leaves groups[q] on ring[q]; we want part q on GPU q
        for ring in intra:
            b.ring_reduce_scatter(ring, chunk, 0)
    if n > 1:
        for q in range(g):
            ring = [sv.ranks[q] for sv in servers]
            ch = servers[0].gpu_nic[q]
            groups = [[chunk[q][i]] for i in range(n)]
            b.ring_reduce_scatter(ring, groups, ch, net=True)
            b.ring_all_gather(ring, groups, ch, net=True)
    if g > 1:
        for ring in intra:
            b.ring_all_gather(ring, chunk, 1 % max(1, servers[0].nics))
    return b.build(
        size,
        topology=topology.shape_fingerprint,
        meta=(("generator", "hierarchical"), ("servers", str(n)), ("gpus_per_server", str(g))),
        check=check,
    )
