"""Balance's rings with the straggler's neighbours owning more: a ring that carries less through it.

In a ring AllReduce over ``p`` positions where position ``i`` ends the reduce-scatter
owning segment ``g_i``, the hop ``i → i+1`` carries everything but ``g_{i+1}`` in the
reduce-scatter and everything but ``g_{i+2}`` in the all-gather: ``2 − g_{i+1} − g_{i+2}``
of the ring's data. Equal segments (NCCL's ring, R2CCL's Balance) load every hop alike,
so a server whose NICs lost a fraction ``1 − β`` of their bandwidth is the ring's
straggler (``1/β`` of the fault-free time, Balance's ``1/(1 − X)``).

Here the two positions after each network hop into or out of the straggler ``d`` own
a larger segment ``x`` and the others ``y``, chosen so that ``d``'s hops carry ``β`` times
what a healthy hop carries::

    2 − 2x = β (2 − 2y),    n_b·x + (p − n_b)·y = 1

(``n_b`` positions, four in a ring that enters and leaves ``d`` once). Every NIC then
carries its share at the same pace and the ring takes ``(2 − 2y)/(2 − 2/p)`` of the
fault-free ring's bandwidth time: on 16 × 8 H100 with one of eight NICs lost, ``y =
1/255`` and the ring's bytes are 1.004 × those of the fault-free ring. It needs ``y > 0``,
that is ``β > 1 − 1/n_b`` (``β > 3/4`` with four positions): one NIC of eight lost, not two.
The owners' big segments are cut into sub-chunks of about ``y`` each, which follow each
other hop by hop, so a big segment streams instead of crossing each hop whole.

The rings, their NICs and the pieces of the buffer are Balance's
(:func:`~resilientcc.schedules.balance.balance_rings`). OptCC uses this schedule above
:data:`~resilientcc.schedules.optcc.PIPELINE_MAX_SERVERS` servers where it applies (1 GiB,
16 × 8 GPUs, 1 NIC lost: 5.884 ms against 6.220 for the rings plus tail and 6.176 for
Balance). Its simulated NICs are ~91 % busy, against 98 % for Balance: the loss is in
the dynamics of unequal segments under Balance's many pieces (on a fault-free cluster
the same weights run at the bytes' time exactly).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from resilientcc.errors import ScheduleError
from resilientcc.schedules.balance import balance_rings
from resilientcc.schedules.ir import COPY, REDUCE, Chunk, Schedule, Transfer
from resilientcc.schedules.ring import ServerLayout, maybe_check, server_layouts
from resilientcc.topology.model import Topology

__all__ = ["relief_positions", "segment_sizes", "weighted_ring", "weighted_ring_applies"]


def relief_positions(order: Sequence[int], server_of: dict[int, int], straggler: int) -> set[int]:
    """Ring positions whose segments relieve the straggler's hops (two after each such hop).

    >>> sorted(relief_positions([0, 1, 2, 3, 4, 5], {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2}, 0))
    [0, 1, 2, 3]
    """
    p = len(order)
    out: set[int] = set()
    for i in range(p):
        a, b = server_of[order[i]], server_of[order[(i + 1) % p]]
        if a != b and straggler in (a, b):
            out.update(((i + 1) % p, (i + 2) % p))
    return out


def segment_sizes(p: int, relief: int, beta: Fraction) -> tuple[Fraction, Fraction]:
    """``(x, y)``: the segment of a relief position and of any other (fractions of the ring).

    Solves ``2 − 2x = β(2 − 2y)`` with ``relief·x + (p − relief)·y = 1``; ``y ≤ 0`` means
    the straggler is too slow for this schedule.

    >>> segment_sizes(128, 4, Fraction(7, 8))
    (Fraction(131, 1020), Fraction(1, 255))
    >>> segment_sizes(32, 4, Fraction(1))
    (Fraction(1, 32), Fraction(1, 32))
    """
    y = (1 - relief * (1 - beta)) / (relief * beta + p - relief)
    return 1 - beta + beta * y, y


def _ring_network(topology: Topology) -> dict[int, ServerLayout] | None:
    """The server layouts, if there are three servers or more and all have NICs."""
    layouts = server_layouts(topology)
    ok = len(layouts) >= 3 and all(lay.nics for lay in layouts.values())
    return layouts if ok else None


def weighted_ring_applies(topology: Topology, beta: Fraction) -> bool:
    """Whether :func:`weighted_ring` can relieve a straggler at bandwidth fraction ``beta``.

    >>> from resilientcc.topology import hierarchical
    >>> weighted_ring_applies(hierarchical(3, 8), Fraction(7, 8))
    True
    >>> weighted_ring_applies(hierarchical(3, 8), Fraction(3, 4))
    False
    """
    if _ring_network(topology) is None or not 0 < beta < 1:
        return False
    return segment_sizes(topology.num_ranks, 4, beta)[1] > 0


def weighted_ring(
    topology: Topology, size: Fraction, straggler: int, beta: Fraction, *, check: bool = True
) -> Schedule:
    """Balance's rings with segments weighted to relieve ``straggler`` (see the module docs).

    Args:
        topology: the cluster, with a network and at least three servers.
        size: message size in bytes.
        straggler: the degraded server.
        beta: its bandwidth as a fraction of a healthy server's (``0 < β < 1``).
        check: run the exact executor (:func:`~resilientcc.schedules.ring.maybe_check`).

    Examples:
        >>> from resilientcc.topology import hierarchical, fail_nics
        >>> s = weighted_ring(fail_nics(hierarchical(3, 8), 0, 1), Fraction(2**20), 0, Fraction(7, 8))
        >>> s.meta_get("segments"), s.meta_get("pieces")
        ('27/188,1/47', '14')
    """
    layouts = _ring_network(topology)
    if layouts is None:
        raise ScheduleError("weighted ring: needs at least three servers with NICs")
    server_of = {r: s for s, lay in layouts.items() for r in lay.ranks}
    p = topology.num_ranks
    rings = balance_rings(topology)
    chunks: list[Chunk] = []
    groups: list[list[list[int]]] = []  # piece -> position -> its sub-chunks
    pos = Fraction(0)
    sizes: tuple[Fraction, Fraction] | None = None
    for w, order in zip(rings.weights, rings.orders, strict=True):
        relief = relief_positions(order, server_of, straggler)
        x, y = segment_sizes(p, len(relief), beta)
        if y <= 0:
            raise ScheduleError(
                f"weighted ring: server {straggler} at {beta} of the bandwidth is too slow"
                f" (needs more than {1 - Fraction(1, len(relief))})"
            )
        sizes = sizes or (x, y)
        per_piece = []
        for i in range(p):
            seg = x if i in relief else y
            k = max(1, round(seg / y))
            subs = []
            for _ in range(k):
                chunks.append(Chunk(len(chunks), pos, w * seg / k))
                pos += w * seg / k
                subs.append(len(chunks) - 1)
            per_piece.append(subs)
        groups.append(per_piece)
    channels = [
        [rings.channel_of(j, order[i], order[(i + 1) % p]) for i in range(p)]
        for j, order in enumerate(rings.orders)
    ]
    transfers: list[Transfer] = []
    prev: dict[tuple[int, int, int], int] = {}  # (piece, position, sub) -> id at the last step
    for t in range(2 * (p - 1)):
        op = REDUCE if t < p - 1 else COPY
        cur: dict[tuple[int, int, int], int] = {}
        for j, order in enumerate(rings.orders):
            for i in range(p):
                src, dst, channel = order[i], order[(i + 1) % p], channels[j][i]
                for sub, c in enumerate(groups[j][(i - t) % p]):
                    deps = (prev[(j, (i - 1) % p, sub)],) if t else ()
                    cur[(j, i, sub)] = len(transfers)
                    transfers.append(Transfer(len(transfers), src, dst, c, op, deps, channel))
        prev = cur
    assert sizes is not None
    sched = Schedule(
        name="weighted_ring",
        ranks=p,
        size=Fraction(size),
        chunks=tuple(chunks),
        transfers=tuple(transfers),
        topology=topology.shape_fingerprint,
        meta=(
            ("pieces", str(len(rings.weights))),
            ("straggler", str(straggler)),
            ("beta", str(beta)),
            ("segments", f"{sizes[0]},{sizes[1]}"),
        ),
    )
    return maybe_check(sched, check)
