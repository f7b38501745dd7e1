"""NCCL's flat ring AllReduce, and the server/NIC layout helpers it shares with the simulator.

The ring runs over all ``p`` GPUs, server by server: a reduce-scatter of ``p − 1``
steps followed by an all-gather of ``p − 1`` steps. The buffer is split into
``C`` channels (one per NIC by default); each channel is an independent ring with its
own ``p`` chunks, so the schedule has ``C·p`` chunks and ``2(p − 1)·C·p`` transfers.

Inside a server, channel ``c``'s ring is rotated so that it *enters* the server at the
GPU whose PCIe NIC is NIC ``c``; the last GPU of the server reaches NIC ``c`` over
NVLink (PXN), so every inter-server hop of channel ``c`` leaves on NIC ``c`` and
arrives on NIC ``c`` of the next server (rail ``c``). Inter-server transfers carry
``channel = c mod K`` (the NIC index on the source server, DEVELOPING.md); intra-server
transfers carry ``channel = c`` (it only names the connection).

Under failure :func:`ring` is the naive baseline: the schedule is unchanged and the
simulator reroutes the channels of dead NICs to surviving NICs round-robin
(:func:`pxn_remap`), so one surviving NIC may carry two channels and slow the whole ring.
:func:`resilientcc.schedules.balance.balance` is the bandwidth-aware version.

Transfer ids are step-major: ``id = (step·C + c)·p + position``, so the FIFO order of
every connection agrees with the dependencies.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from resilientcc._gc import gc_paused
from resilientcc.errors import InputError
from resilientcc.schedules import executor
from resilientcc.schedules._build import require_servers
from resilientcc.schedules.ir import COPY, REDUCE, Chunk, Schedule, Transfer
from resilientcc.topology.model import Topology
from resilientcc.units import to_size

__all__ = [
    "CHECK_CAP",
    "ServerLayout",
    "maybe_check",
    "nic_capacity",
    "pxn_remap",
    "ring",
    "ring_allreduce",
    "server_layouts",
]

#: The generators skip the exact executor when ``chunks · p²`` exceeds this (the
#: executor is O(chunks · p²) in memory traffic; 2**27 is about 5 s on one core).
CHECK_CAP = 2**27


@dataclass(frozen=True)
class ServerLayout:
    """The GPUs and NICs of one server, as the ring and the simulator see them.

    Attributes:
        server: server index.
        ranks: ranks of the server's GPUs, in local order.
        locals: local GPU indices, same order as ``ranks``.
        nics: local indices of all NICs (failed ones included), sorted.
        alive: local indices of the alive NICs, sorted.
        nic_of_gpu: local GPU index -> local index of the NIC it reaches over PCIe
            (``None`` when it has none).
    """

    server: int
    ranks: tuple[int, ...]
    locals: tuple[int, ...]
    nics: tuple[int, ...]
    alive: tuple[int, ...]
    nic_of_gpu: Mapping[int, int | None]

    def gpu_of_nic(self, nic: int) -> int | None:
        """The first local GPU whose PCIe NIC is ``nic`` (``None`` if there is none)."""
        for g in self.locals:
            if self.nic_of_gpu.get(g) == nic:
                return g
        return None


def server_layouts(topology: Topology) -> dict[int, ServerLayout]:
    """Per-server layout: GPUs, NICs, alive NICs and the GPU→NIC (PCIe) attachment.

    For ``hierarchical`` topologies the attachment is the builder's rule
    ``g * K // G`` (it survives NIC failures, which remove links); otherwise it is read
    from the links (a GPU→NIC link).

    Examples:
        >>> from resilientcc.topology import hierarchical, fail_nics
        >>> lay = server_layouts(fail_nics(hierarchical(2, 8, 4), 0, 1))[0]
        >>> lay.alive, lay.nic_of_gpu[3]
        ((1, 2, 3), 1)
    """
    require_servers(topology)
    hier = topology.param("builder") == "hierarchical"
    out: dict[int, ServerLayout] = {}
    nodes = topology.node_by_name
    for s, gpus in topology.gpus_of_server.items():
        nic_nodes = topology.nics_of_server.get(s, ())
        nics = tuple(n.local or 0 for n in nic_nodes)
        alive = tuple(n.local or 0 for n in nic_nodes if not n.failed)
        g_count = len(gpus)
        k_count = len(nics)
        attach: dict[int, int | None] = {}
        for g in gpus:
            gl = g.local or 0
            if hier and k_count:
                attach[gl] = gl * k_count // g_count
                continue
            attach[gl] = None
            for li in topology.out_links[g.name]:
                nd = nodes[topology.links[li].dst]
                if nd.kind == "nic" and nd.server == s:
                    attach[gl] = nd.local
                    break
        ordered = sorted(gpus, key=lambda n: n.local or 0)
        out[s] = ServerLayout(
            server=s,
            ranks=tuple(g.rank or 0 for g in ordered),
            locals=tuple(g.local or 0 for g in ordered),
            nics=nics,
            alive=alive,
            nic_of_gpu=attach,
        )
    return out


def pxn_remap(layout: ServerLayout) -> dict[int, int]:
    """NIC index -> the alive NIC that carries its traffic (NCCL-like PXN fallback).

    Alive NICs map to themselves; the ``i``-th dead NIC (by index) maps to the
    ``i mod len(alive)``-th alive NIC. No rebalancing: one alive NIC may carry several.

    Examples:
        >>> lay = ServerLayout(0, (0,), (0,), (0, 1, 2, 3), (2, 3), {0: 0})
        >>> pxn_remap(lay)
        {0: 2, 1: 3, 2: 2, 3: 3}
    """
    alive = layout.alive
    out = {k: k for k in alive}
    if alive:
        dead = [k for k in layout.nics if k not in out]
        for i, k in enumerate(dead):
            out[k] = alive[i % len(alive)]
    return dict(sorted(out.items()))


def nic_capacity(topology: Topology, server: int, nic: int, direction: str = "out") -> Fraction:
    """Capacity of the network links leaving (``"out"``) or entering (``"in"``) a NIC."""
    name = f"s{server}.nic{nic}"
    for n in topology.nics_of_server.get(server, ()):
        if n.local == nic:
            name = n.name
            break
    idx = (
        topology.out_links.get(name, ()) if direction == "out" else topology.in_links.get(name, ())
    )
    return sum(
        (topology.links[i].capacity for i in idx if topology.links[i].kind == "network"),
        Fraction(0),
    )


#: the most ring channels (NCCL's MAXCHANNELS is 32; each channel is a whole ring)
MAX_RING_CHANNELS = 64


def maybe_check(schedule: Schedule, check: bool) -> Schedule:
    """Run the exact executor unless ``check`` is false or the schedule exceeds CHECK_CAP."""
    if check and len(schedule.chunks) * schedule.ranks**2 <= CHECK_CAP:
        executor.check(schedule)
    return schedule


def _no_options(name: str, options: Mapping[str, Any]) -> None:
    if options:
        raise InputError(f"{name}: unknown option(s) {', '.join(sorted(options))}")


def ring_order(
    layouts: Mapping[int, ServerLayout], entry_nic: Callable[[int], int | None]
) -> list[int]:
    """Ranks server by server; each server's GPUs rotated to start at the GPU of ``entry_nic(s)``."""
    order: list[int] = []
    for s in sorted(layouts):
        lay = layouts[s]
        nic = entry_nic(s)
        g0 = lay.gpu_of_nic(nic) if nic is not None else None
        start = lay.locals.index(g0) if g0 is not None else 0
        ranks = list(lay.ranks)
        order += ranks[start:] + ranks[:start]
    return order


def ring_allreduce(
    name: str,
    topology: Topology,
    size: Fraction,
    weights: Sequence[Fraction],
    orders: Sequence[Sequence[int]],
    channel_of: Callable[[int, int, int], int],
    meta: Sequence[tuple[str, str]] = (),
) -> Schedule:
    """Build ring AllReduces over several pieces of the buffer (no check).

    Args:
        name: schedule name.
        topology: the topology (for ``shape_fingerprint`` and the rank count).
        size: message size in bytes.
        weights: fraction of the buffer per piece (a logical channel); sum to 1.
        orders: per piece, the ring as a sequence of all ``p`` ranks.
        channel_of: ``(piece, src_rank, dst_rank) -> channel`` of the hop.
        meta: extra meta pairs.

    Piece ``j`` owns chunks ``j·p .. j·p + p − 1`` (each ``weights[j] / p`` of the buffer).
    Transfer ``(t, j, i)`` (step ``t`` in ``0 .. 2p − 3``, position ``i``) has id
    ``(t·J + j)·p + i``, sends chunk ``(i − t) mod p`` of piece ``j`` from position ``i``
    to ``i + 1``, reduces for ``t < p − 1`` and copies after, and depends on
    ``(t − 1, j, i − 1)``.
    """
    p = topology.num_ranks
    n_pieces = len(weights)
    if sum(weights, Fraction(0)) != 1:
        raise InputError(f"{name}: piece weights sum to {sum(weights, Fraction(0))}, not 1")
    chunks: list[Chunk] = []
    pos = Fraction(0)
    for w in weights:
        for _ in range(p):
            chunks.append(Chunk(len(chunks), pos, w / p))
            pos += w / p
    channels = [
        [channel_of(j, orders[j][i], orders[j][(i + 1) % p]) for i in range(p)]
        for j in range(n_pieces)
    ]
    transfers: list[Transfer] = []
    if p > 1:
        steps = 2 * (p - 1)
        for t in range(steps):
            op = REDUCE if t < p - 1 else COPY
            for j in range(n_pieces):
                order = orders[j]
                chans = channels[j]
                base = (t * n_pieces + j) * p
                prev = ((t - 1) * n_pieces + j) * p
                cbase = j * p
                for i in range(p):
                    transfers.append(
                        Transfer(
                            base + i,
                            order[i],
                            order[(i + 1) % p],
                            cbase + (i - t) % p,
                            op,
                            (prev + (i - 1) % p,) if t else (),
                            chans[i],
                        )
                    )
    return Schedule(
        name=name,
        ranks=p,
        size=size,
        chunks=tuple(chunks),
        transfers=tuple(transfers),
        topology=topology.shape_fingerprint,
        meta=tuple(meta),
    )


@gc_paused
def ring(
    topology: Topology,
    size: Fraction,
    *,
    check: bool = True,
    channels: int | None = None,
    **options: Any,
) -> Schedule:
    """NCCL's flat ring AllReduce over all GPUs, one channel per NIC.

    Args:
        topology: the cluster (failures are ignored: the naive baseline keeps the ring
            and the simulator reroutes dead NICs' channels by PXN).
        size: message size, in bytes (int, Fraction or float) or as text such as
            "1GiB" (:func:`~resilientcc.units.to_size`).
        check: run the exact executor (skipped when ``chunks·p² > CHECK_CAP``).
        channels: number of channels ``C`` (default: NICs per server, at least 1).
            Channel ``c`` carries ``1/C`` of the buffer and leaves every server on NIC
            ``c mod K``. Fewer channels mean fewer transfers (``2(p−1)·C·p``) but fewer NICs.

    Examples:
        >>> from resilientcc.topology import hierarchical
        >>> s = ring(hierarchical(2, 2), Fraction(1024))
        >>> len(s.chunks), len(s.transfers)
        (8, 48)
    """
    _no_options("ring", options)
    size = to_size(size)
    layouts = server_layouts(topology)
    k_max = max((len(lay.nics) for lay in layouts.values()), default=0)
    n_ch = max(1, k_max) if channels is None else channels
    if isinstance(n_ch, bool) or not isinstance(n_ch, int) or n_ch < 1:
        raise InputError(f"ring: channels must be a positive integer, got {channels!r}")
    if n_ch > MAX_RING_CHANNELS:
        raise InputError(
            f"ring: {n_ch} channels, more than {MAX_RING_CHANNELS} (NCCL runs at most 32)"
        )
    server_of = {r: s for s, lay in layouts.items() for r in lay.ranks}

    def nic_for(c: int, s: int) -> int | None:
        nics = layouts[s].nics
        return nics[c % len(nics)] if nics else None

    orders = [ring_order(layouts, functools.partial(nic_for, c)) for c in range(n_ch)]

    def channel_of(j: int, src: int, dst: int) -> int:
        if server_of[src] == server_of[dst]:
            return j
        nic = nic_for(j, server_of[src])
        return j if nic is None else nic

    sched = ring_allreduce(
        "ring",
        topology,
        size,
        [Fraction(1, n_ch)] * n_ch,
        orders,
        channel_of,
        meta=(("channels", str(n_ch)),),
    )
    return maybe_check(sched, check)
