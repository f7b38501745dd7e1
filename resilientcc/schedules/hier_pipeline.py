"""OptCC's pipelined hierarchical variant: NVLink and NICs busy at once, shards sized by bandwidth.

The bound of a cluster of ``G``-GPU servers is set by two resources that a flat ring
never uses together: NVLink (every GPU moves at least ``2(G−1)/G · M`` each way when a
server reduces inside before crossing the network) and the NICs (``(1 + (N−2) w_s) · M``
per server, :func:`~resilientcc.schedules.optcc.balanced_shares`). This schedule keeps
both busy at the same time. The buffer is cut into ``pieces``; for each piece

1. **intra-server reduce-scatter** (a ring over the server's GPUs, NVLink): the part of
   the piece that travels on rail ``c`` ends, summed over the server, on the GPU of NIC
   ``c``;
2. **network reduce-scatter** (one hop, rail ``c``): each part is split among the servers
   by their owner shares ``w_t``; every server sends its partial of ``t``'s shard to
   ``t``, whose GPU on the same rail adds it in (sources in rotated order, so that at
   every moment each NIC sends to a different owner);
3. **return** (one hop): the owner copies the summed shard back to every server;
4. **intra-server all-gather** (ring, NVLink).

Successive pieces overlap: while piece ``k`` crosses the network, piece ``k + 1`` is
reduced inside the servers and piece ``k − 1`` gathered. The stages have their own FIFO
connections (intra reduce-scatter, intra all-gather, network reduce-scatter and returns
on channels ``c`` and ``c + K`` of NIC ``c``), and transfer ids follow the pieces, so
each connection works through the pieces in order. A credit window keeps the stages in
step: a GPU sends its partials of piece ``k`` once its results of piece ``k − W`` are
back (:func:`default_net_window`), so that returns do not pile up behind partials of
later pieces (1 GiB, 8 × 8 GPUs, 1 / 2 / 4 NICs lost: 5.522 / 5.972 / 5.934 ms without
it, 5.189 / 5.394 / 5.815 with it).

**A server with dead NICs** (the straggler ``d``, ``L`` of its ``K = G`` NICs lost, the
alive ones at full rate). Its part for a dead rail ``q`` cannot leave on rail ``q``.
Each dead rail's part is split into one sub-part per alive rail ``c`` (class
``B(q, c)``): on ``d`` it ends on the GPU of NIC ``c`` and all of ``d``'s traffic for
it uses rail ``c``. On the healthy servers a healthy owner's shard of it stays on the
GPU of rail ``q``, which exchanges it with the other healthy servers on rail ``q`` and
with ``d`` through the GPU of rail ``c`` (one NVLink hop, PXN); ``d``'s own shard of it
is held on the GPU of rail ``c``, so it crosses the network rail to rail (held on rail
``q`` it crossed that GPU's port twice more: 4 × 8 GPUs, 1 NIC lost, 1 GiB, 1.059 ×
the bound against 1.050). The alive rails' parts (class ``A(c)``) are
unchanged. The sizes of ``A`` and ``B`` make every NIC of a healthy server carry the
same load (:func:`class_sizes`); every alive NIC of ``d`` carries ``1/(G − L)`` of ``d``'s
traffic, which the shares already make equal to a healthy server's time.

**The relay** (:func:`default_relay`). In ``d``'s rings its dead-rail GPUs own nothing,
so with one of 8 lost the dead GPU and its ring neighbours move ``13/7 · M`` each way
over NVLink where the others move ``7/4 · M``. With ``relay = u > 0`` ``d``'s two NVLink
stages are direct instead (each GPU sends its partial of a group straight to the
group's reducer; the reducer's adds run in turn) and each dead GPU reduces whole chunks
worth ``u`` of every piece, which it copies to the alive GPU that sends them on the
network and takes back from it for the all-gather: with ``u = 1/9`` no port of ``d``
moves more than about ``16/9 · M``. OptCC uses it with one NIC lost from 256 MiB on up
to six servers (:func:`pipeline_relay`) and then a deeper, time-ordered pipeline
(:func:`pipeline_depth`).

**A server whose NICs are all slower** (alive, all at the same fraction ``β``): no rail
is dead, every class is one rail's part, and only the shares (from the bound) see its
bandwidth. :func:`pipeline_blocker` accepts a degraded server whose alive NICs are all
at the same bandwidth (``ServerInfo.uniform_nics``); where one NIC is slower than its
neighbours OptCC first leaves it out if that pays
(:func:`~resilientcc.schedules._build.usable_view`), else keeps its direct schedules.

**Several degraded servers alike** (the same NICs dead, the same bandwidth): they share
the classes, each keeps its parts of the dead rails on the GPUs of its alive rails, and
every exchange with one of them uses the alive rail. :func:`class_sizes` counts their
traffic ``D`` times (256 MiB, 4 × 8 GPUs, two servers with 1 NIC lost each: 1.19 ×
the bound where the direct schedule took 1.46 ×; three of 6 servers with 1 lost: 1.19 ×
against 2.55 ×). Degraded servers that lost different NICs would need classes per pair
of servers: OptCC sees them alike where that costs little
(:func:`~resilientcc.schedules.optcc.alike_view`), else keeps its direct schedule.

It moves the bytes of the bound's water-filling: server ``s`` sends and receives
``(1 + (N−2) w_s) · M`` over the network, and every GPU ``2(G−1)/G · M`` over NVLink,
plus the PXN hops of the ``B`` classes on the healthy servers and an uneven ring on
``d``: its dead GPUs own nothing, so, spread along the ring (:func:`ring_order`), each
of them and its neighbours carry ``2 − 1/(G−L)`` instead of ``2(G−1)/G`` (for
``L ≤ G/2``). It needs the degraded servers alike, their alive NICs at one bandwidth,
and one NIC per GPU (:func:`pipeline_blocker`). Its transfers grow as ``pieces · N² · G²``
(every shard is its own chunk), so OptCC uses it up to
:data:`~resilientcc.schedules.optcc.PIPELINE_MAX_SERVERS` servers.

**Decoupled regime** (``β ≤ β*``: ``d`` owns nothing, ``w_d = 0``). The same stages run
with the healthy servers as the only owners: ``d`` sends its partials (``M``) and
receives the results (``M``), the bound's bytes. ``d``'s results wait for its own
partials, but only by one piece: its egress and ingress carry the same bytes at the
same rate, so with 64 pieces both stream from the first piece to the last. ``d``'s
flows share the healthy NICs fairly with the healthy servers' flows, so the rails dead
on ``d`` are loaded up to ``d``'s per-NIC time (:func:`class_sizes`) and the alive
ones keep slack for ``d``. With the credit window it is faster than OptCC's direct
schedule on 3 to 8 servers (1 GiB, 4 of 8 NICs lost, 3 / 4 / 5 / 8 servers: 5.643 /
5.685 / 5.694 / 5.815 ms against 6.334 / 5.887 / 6.112 / 6.620); without it, it only
tied on 4 servers (5.896). OptCC now runs the hierarchical ring
(:mod:`~resilientcc.schedules.hier_ring`) in this regime instead (4 / 8 servers: 5.497 /
5.569 ms).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from resilientcc.errors import ScheduleError
from resilientcc.schedules._build import (
    LINE_NIC_BW,
    LINE_NVL_BW,
    NET_LAT,
    NVL_LAT,
    Builder,
    ServerInfo,
)
from resilientcc.schedules.ir import COPY, REDUCE

__all__ = [
    "PipeClass",
    "class_sizes",
    "default_healthy_lanes",
    "default_healthy_pieces",
    "default_net_window",
    "default_own_lag",
    "default_pipeline_flat_tail",
    "default_pipeline_pieces",
    "default_relay",
    "default_relay_sum",
    "degraded_alike",
    "hier_pipeline",
    "nvlink_ring_channel",
    "nvlink_rings",
    "pipeline_blocker",
    "pipeline_depth",
    "pipeline_relay",
    "ring_order",
    "shape_blocker",
]

#: bytes per piece the default pipeline aims at (1 GiB: 64 pieces, 256 MiB: 32)
PIECE_BYTES = 8 * 2**20
#: the deepest default pipeline
MAX_PIECES = 64
#: with no degraded server (8 GPUs per server): pieces of this many bytes
#: (:func:`default_healthy_pieces`), their NVLink rings on up to :data:`HEALTHY_MAX_LANES`
#: lanes, one per :data:`HEALTHY_LANE_BYTES` of pieces (:func:`default_healthy_lanes`)
HEALTHY_LANE_PIECE_BYTES = 4 * 2**20
HEALTHY_LANE_BYTES = 16 * 2**20
HEALTHY_MAX_LANES = 4
#: bytes of the buffer per piece of the network stage's credit window (N + 2 of them)
WINDOW_BYTES = 16 * 2**20
#: the relay (:func:`default_relay`) is used where it saves this part of the busiest port
RELAY_MIN_GAIN = Fraction(1, 50)
#: a deep pipeline (:func:`pipeline_depth`) is ordered by estimated time, pieces this many
#: periods apart (``hier_pipeline``'s ``timing``)
DEEP_TIMING = 1.0
#: the pipeline around a degraded server is deep where its default depth is at most this
DEEP_MAX_BASE_PIECES = 32
#: with the relay the pipeline is deep on this many servers at any size
RELAY_DEEP_SERVERS = (4, 6)
#: OptCC's default relay from this many bytes on (:func:`pipeline_relay`)
RELAY_MIN_BYTES = 2**28
#: OptCC's default relay only up to this many servers (:func:`pipeline_relay`)
RELAY_MAX_SERVERS = 6
#: with two of 8 rails dead on one degraded server, from :data:`RELAY_TWO_MIN_SERVERS`
#: servers on, OptCC's relay is this part of every piece, and ``own_lag`` 0
#: (:func:`pipeline_relay`, :func:`default_own_lag`)
RELAY_TWO_DEAD = Fraction(1, 8)
RELAY_TWO_MIN_SERVERS = 4
#: the first channel of the NVLink rings' second lane (:func:`nvlink_ring_channel`)
NVLINK_LANE_BASE = 4
#: NVLink channel of the broadcasts of a degraded owner's late results (``own_lag``)
LATE_CHANNEL = 3
#: OptCC's ``own_lag`` (:func:`default_own_lag`): around one degraded server that owns a
#: share, from :data:`OWN_LAG_MIN_SERVERS` servers and :data:`OWN_LAG_MIN_PIECES` pieces
#: on and without the relay, 1 piece, and 2 from :data:`OWN_LAG_TWO_BYTES` on
OWN_LAG_MIN_SERVERS = 4
OWN_LAG_MIN_PIECES = 8
OWN_LAG_TWO_BYTES = 2**30
#: with the relay of one dead rail, ``own_lag`` 0 from this many servers on
#: (:func:`default_own_lag`)
OWN_LAG_RELAY_MIN_SERVERS = 5
#: around one degraded server, on at least :data:`FLAT_TAIL_MIN_SERVERS` servers and
#: up to :data:`FLAT_TAIL_ONE_MAX_BYTES`, the pieces in the last this many bytes end
#: with a flat NVLink all-gather (:func:`default_pipeline_flat_tail`)
FLAT_TAIL_BYTES = 24 * 2**20
FLAT_TAIL_MIN_SERVERS = 4
FLAT_TAIL_ONE_MAX_BYTES = 512 * 2**20
#: the same around several degraded servers (alike) from this many servers on
FLAT_TAIL_SEVERAL_MIN_SERVERS = 3


@dataclass(frozen=True)
class PipeClass:
    """A part of every piece that travels on one rail (see the module docs).

    Attributes:
        rail: the NIC index (and local GPU) that holds it on healthy servers.
        rail_d: the same on the degraded server; its traffic with that server uses it.
        size: fraction of the piece.
        crossed: every degraded server alive on ``rail_d`` exchanges the class there,
            even where ``rail`` is alive (degraded servers that differ,
            :func:`~resilientcc.schedules.hier_ring.unlike_classes`); else ``rail`` where
            alive comes first.
    """

    rail: int
    rail_d: int
    size: Fraction
    crossed: bool = False


def class_sizes(
    nics: int,
    dead: Sequence[int],
    servers: int,
    w_healthy: Fraction,
    w_degraded: Fraction,
    degraded: int = 1,
) -> tuple[Fraction, Fraction]:
    """Sizes ``(A, b)`` of the ``A(c)`` and ``B(q, c)`` classes (fractions of a piece).

    ``a·A + L·a·b = 1`` with ``a`` alive and ``L`` dead rails, and every NIC of a healthy
    server carries the same load: an alive rail ``A·(1 + (N−2) w_h) + L·b·(w_d + w_h)``
    (its own part with everyone, and ``d``'s sub-parts of the dead rails), a dead rail
    ``a·b·2(N−2) w_h`` (the dead part with the other healthy servers). With two servers
    a dead rail carries nothing and ``b = 0``. With ``D = degraded`` servers alike (the
    same NICs dead) each term for ``d`` counts ``D`` times: the alive rail carries
    ``L·b·D·(w_d + w_h)`` of their sub-parts, and ``N − 2`` becomes ``N − 1 − D`` in the
    dead rail's ``a·b·2(N − 1 − D) w_h`` (shares summing to 1: ``(N − D) w_h + D w_d``).

    When the straggler owns nothing (``w_d = 0``) a dead rail is instead loaded up to the
    straggler's per-NIC time, ``a·b·2(N−2) w_h = 1/a`` (where that leaves ``A > 0``): the
    alive rails then carry less than the dead ones, and that slack absorbs ``d``'s
    flows, which take the healthy NICs' bandwidth at ``d``'s pace (1 GiB, 8 × 8 GPUs, 4
    NICs lost, 64 pieces: 6.237 ms with the balanced sizes, 5.934 with these). Where
    ``d``'s flows alone load an alive rail at least as much as the whole piece would
    load the dead ones (``2a(N−2) ≤ L``: one rail alive on up to 5 servers, two on 3),
    every part goes on the dead rails, ``A = 0``, which keeps them within ``d``'s per-NIC
    time (the balanced sizes would be negative; putting everything on the alive rails,
    as before, took 1.95 × the bound on 4 × 8 GPUs with 7 NICs lost). The same holds
    where the degraded servers own shares (several of them alike, each with many NICs
    lost: their flows load the alive rails, and ``A`` only adds to that): everything on
    the dead rails. Until 2026-11-27 everything went on the alive rails there, and the
    healthy servers' dead-rail NICs idled (5 servers, three with NICs 0-3 lost, 1 GiB:
    2.123 × the bound, with these sizes 1.327).

    >>> class_sizes(8, [], 4, Fraction(1, 4), Fraction(1, 4))
    (Fraction(1, 8), Fraction(0, 1))
    >>> A, b = class_sizes(8, [0], 4, Fraction(17, 62), Fraction(11, 62))
    >>> A, b, 7 * A + 7 * b
    (Fraction(2, 17), Fraction(3, 119), Fraction(1, 1))
    >>> class_sizes(8, [0, 1, 2, 3], 8, Fraction(1, 7), Fraction(0))  # b = 7/192, not 13/384
    (Fraction(5, 48), Fraction(7, 192))
    >>> class_sizes(8, list(range(7)), 4, Fraction(1, 3), Fraction(0))  # 2a(N-2) = 4 <= 7
    (Fraction(0, 1), Fraction(1, 7))
    >>> class_sizes(8, [0, 1, 2, 3], 5, Fraction(3, 7), Fraction(1, 21), 3)  # owning, A = 0
    (Fraction(0, 1), Fraction(1, 16))
    """
    a = nics - len(dead)
    if not dead:
        return Fraction(1, nics), Fraction(0)
    others = servers - 1 - degraded  # the healthy servers but one
    num = 2 * a * others * w_healthy - len(dead) * degraded * (w_degraded + w_healthy)
    if num <= 0 and others > 0:
        # so few rails alive on d that its traffic alone loads them as much as the whole
        # piece would load the dead ones: everything goes on the dead rails (whether d
        # owns a share or not: the alive rails' load only grows with A)
        return Fraction(0), Fraction(1, len(dead) * a)
    if num <= 0:
        return Fraction(1, a), Fraction(0)
    ratio = num / (1 + (servers - 2) * w_healthy)  # A / b
    b = 1 / (a * ratio + len(dead) * a)
    if w_degraded == 0:
        # decoupled: load the dead rails up to the straggler's per-NIC time 1/a
        fill = 1 / (2 * a * a * others * w_healthy)
        if b < fill and len(dead) * a * fill < 1:
            return (1 - len(dead) * a * fill) / a, fill
    return ratio * b, b


def degraded_alike(servers: Sequence[ServerInfo]) -> bool:
    """Whether the degraded servers are alike: the same NICs alive at the same bandwidth
    (what :func:`pipeline_blocker` asks)."""
    return len({(sv.alive, sv.egress, sv.ingress) for sv in servers if not sv.healthy}) <= 1


def shape_blocker(servers: Sequence[ServerInfo]) -> str | None:
    """What both layered schedules (this one and the hierarchical ring) need and
    ``servers`` lack, if anything: two servers of ``G`` GPUs with one NIC each, and each
    degraded server's alive NICs at one bandwidth."""
    if len(servers) < 2:
        return "two servers"
    g = len(servers[0].ranks)
    if any(len(sv.ranks) != g or sv.nics != g for sv in servers):
        return "the same number of GPUs on every server and one NIC per GPU"
    if any(not (sv.alive and sv.uniform_nics) for sv in servers if not sv.healthy):
        return "the degraded server's alive NICs all at the same bandwidth"
    return None


def pipeline_blocker(servers: Sequence[ServerInfo]) -> str | None:
    """Why the pipelined hierarchical schedule cannot run on ``servers`` (``None`` if it can)."""
    blocker = shape_blocker(servers)
    if blocker is None and not degraded_alike(servers):
        return "the degraded servers' NICs alike (the same ones alive, at the same bandwidth)"
    return blocker


def default_pipeline_pieces(size: Fraction) -> int:
    """Pipeline depth: one piece per :data:`PIECE_BYTES`, from 2 to :data:`MAX_PIECES`.

    Measured on 4 × 8 H100, 1 GiB, 1 NIC lost: 16 / 32 / 64 / 96 / 128 pieces
    took 4.99 / 4.69 / 4.48 / 4.53 / 4.57 ms; at 256 MiB 16 / 32 pieces 1.291 / 1.248 ms.

    >>> default_pipeline_pieces(Fraction(2**30)), default_pipeline_pieces(Fraction(2**28))
    (64, 32)
    """
    return max(2, min(MAX_PIECES, round(size / PIECE_BYTES)))


def default_healthy_pieces(size: Fraction, servers: int, gpus: int = 8) -> int:
    """Pipeline depth with no degraded server: 2 to 64 pieces.

    With 8 or more GPUs per server (measured with 8), pieces of
    :data:`HEALTHY_LANE_PIECE_BYTES` (4 MiB), their NVLink rings spread over
    :func:`default_healthy_lanes` lanes; with fewer, one lane and pieces of
    :data:`PIECE_BYTES` (8 MiB).

    On one lane (one connection per GPU pair and pass, in FIFO order) a piece's ring step
    waits behind the previous piece's last step, so every piece pays its ``G − 1`` NVLink
    hops of 3.4 µs; that made pieces of 16 MiB (2 MiB per server above 4 servers) the best
    depth on one lane. Spread over lanes, the next pieces move while a piece's step waits
    for its hop, and smaller pieces fill and drain the pipeline faster. Ratios to NCCL's
    ring (8 GPUs per server), the earlier default (16 MiB pieces up to 4 servers, ``2N``
    MiB above, one lane) against this one:

    =======  ===============  ===============  ===============  ===============
    servers  64 MiB           256 MiB          512 MiB          1 GiB
    =======  ===============  ===============  ===============  ===============
    2        0.907 / 0.872    0.855 / 0.845
    4        0.887 / 0.788    0.865 / 0.840    0.826 / 0.815    0.812 / 0.812
    8        0.655 / 0.561    0.993 / 0.967                     0.916 / 0.916
    =======  ===============  ===============  ===============  ===============

    With 4 or 2 GPUs per server the lanes gained at most 2 % (2 MiB pieces; 4 MiB pieces
    lost), so those keep one lane and 8 MiB pieces (larger ones lost there: 4 GPUs per
    server, 16 / 8 MiB pieces, 2 servers at 64 MiB 0.686 / 0.648 × the ring).
    With a degraded server more pieces pay (8 × 8 GPUs, 256 MiB, 1 NIC lost: 16 / 32
    pieces 1.554 / 1.495 ms) and lanes do not (the healthy servers' pieces then run ahead
    of the straggler's: 4 × 8 GPUs, 256 MiB, 2 NICs lost, 2 / 4 lanes on every server
    1.130 / 1.143 × the bound, on the healthy ones only 1.143 / 1.155, against 1.127),
    hence :func:`default_pipeline_pieces` and one lane there.

    >>> tuple(default_healthy_pieces(Fraction(2**28), n) for n in (2, 4, 5, 8))
    (64, 64, 64, 64)
    >>> default_healthy_pieces(Fraction(2**30), 8), default_healthy_pieces(Fraction(2**25), 8)
    (64, 8)
    >>> default_healthy_pieces(Fraction(2**28), 8, gpus=4)  # 8 MiB
    32
    """
    per_piece = HEALTHY_LANE_PIECE_BYTES if gpus >= 8 else PIECE_BYTES
    return max(2, min(MAX_PIECES, round(size / per_piece)))


def default_healthy_lanes(size: Fraction, pieces: int, gpus: int = 8) -> int:
    """NVLink lanes (``nvlink_channels`` of :func:`hier_pipeline`) with no degraded server.

    With 8 or more GPUs per server, as many lanes as make up :data:`HEALTHY_LANE_BYTES`
    (16 MiB) of pieces, 1 to :data:`HEALTHY_MAX_LANES`, and no more than the pieces;
    else 1. See :func:`default_healthy_pieces`.

    >>> tuple(default_healthy_lanes(Fraction(m * 2**20), 64) for m in (256, 512, 1024))
    (4, 2, 1)
    >>> default_healthy_lanes(Fraction(2**23), 2), default_healthy_lanes(Fraction(2**28), 32, 4)
    (2, 1)
    """
    if gpus < 8:
        return 1
    lanes = math.floor(HEALTHY_LANE_BYTES * pieces / size)
    return max(1, min(HEALTHY_MAX_LANES, pieces, lanes))


def default_net_window(servers: int, size: Fraction, pieces: int) -> int:
    """Credit window of the network stage, in pieces: ``N + 2`` pieces of 16 MiB, and
    never fewer than ``N + 2`` pieces.

    A GPU sends its partials of piece ``k`` only once the results of piece ``k − W``
    have come back to it. Without the window the partials (and the intra-server
    reduce-scatter feeding them) run ahead of the returns, which then share every NIC's
    ingress with partials of later pieces and pile up at the end: the straggler's
    ingress was ~60 % busy over the last quarter of the run (1 GiB, 6 and 8 × 8 GPUs,
    1 NIC lost). Measured at 1 GiB (64 pieces of 16 MiB): 8 servers, 1 NIC lost,
    ``W`` = 8 / 9 / 10 / 12 took 5.430 / 5.205 / 5.189 / 5.263 ms against 5.522 with
    none (too small a window adds round trips to the critical path); 6 servers
    (zero latency) ``W`` = 3 / 5 / 6 / 8 / 12 took 6.436 / 5.046 / 4.889 / 4.908 /
    4.997 against 5.204. The round trip is a time, so with smaller pieces the window
    counts more of them (256 MiB, 32 pieces: ``2(N + 2)``, where on 4 servers the
    window no longer binds; ``N + 2`` pieces of 8 MiB measured 1.305 against 1.288 ms).

    With pieces larger than 16 MiB (the depth is capped, :data:`MAX_PIECES`) a piece's
    own transfers make most of its round trip, and a window of fewer than ``N + 2``
    pieces starved the pipeline: 4 × 8 GPUs, × the bound before → after the floor, no
    failure 2 / 8 GiB (``W`` 3 / 1) 1.148 / 1.093 → 1.015 / 1.012; 8 GiB, 1 / 2 NICs
    lost (``W`` 2) 1.780 / 1.405 → 1.034 / 1.034, every NIC at 7/8 (``W`` 1) 2.039 →
    1.031; 2 GiB, 3 lost (``W`` 3) 1.343 → 1.069. Up to 1 GiB the window was ``N + 2``
    or more already.

    >>> default_net_window(8, Fraction(2**30), 64), default_net_window(4, Fraction(2**28), 32)
    (10, 12)
    >>> default_net_window(4, Fraction(2**33), 64)  # 128 MiB pieces: still N + 2
    6
    """
    return max(servers + 2, math.ceil((servers + 2) * WINDOW_BYTES * pieces / size))


def ring_order(g: int, empty: Sequence[int]) -> list[int]:
    """The ``g`` local GPUs in NVLink ring order, those in ``empty`` spread among the others.

    In a ring reduce-scatter the link out of a GPU carries everything but that GPU's own
    group, and in the all-gather the link into it does; a GPU that owns nothing (the
    straggler's dead-rail GPUs) therefore makes its ring neighbours carry a whole piece
    too. Spread out, no GPU sits between two of them: with 2 of 8 rails dead the busiest
    port carries ``11/6`` of a piece each way instead of ``2``, and with half the GPUs
    empty every port carries ``7/4``, the fault-free load.

    >>> ring_order(8, [0, 1]), ring_order(8, [0, 1, 2, 3])
    ([2, 3, 4, 0, 5, 6, 7, 1], [4, 0, 5, 1, 6, 2, 7, 3])
    """
    full = [i for i in range(g) if i not in empty]
    spread = sorted(empty)
    if not spread or not full:
        return list(range(g))
    out: list[int] = []
    placed = 0
    for j, gpu in enumerate(full, 1):
        out.append(gpu)
        upto = j * len(spread) // len(full)
        out += spread[placed:upto]
        placed = upto
    return out


def nvlink_rings(servers: Sequence[ServerInfo]) -> dict[int, list[int]]:
    """Each server's GPU ranks in NVLink ring order, its dead-rail GPUs spread (:func:`ring_order`)."""
    return {
        sv.index: [
            sv.ranks[x]
            for x in ring_order(
                sv.nics, [sv.nic_gpu[q] for q in range(sv.nics) if q not in sv.alive]
            )
        ]
        for sv in servers
    }


def _classes(
    servers: Sequence[ServerInfo], shares: Mapping[int, Fraction], d: ServerInfo | None
) -> list[PipeClass]:
    g = servers[0].nics
    if d is None:
        return [PipeClass(c, c, Fraction(1, g)) for c in range(g)]
    alive = list(d.alive)
    dead = [q for q in range(g) if q not in d.alive]
    if all(not sv.healthy for sv in servers):
        # every server degraded alike: a healthy cluster on the alive rails
        return [PipeClass(c, c, Fraction(1, len(alive))) for c in alive]
    w_h = max(shares[sv.index] for sv in servers if sv.healthy)
    slow = sum(1 for sv in servers if not sv.healthy)
    big, small = class_sizes(g, dead, len(servers), w_h, shares[d.index], slow)
    out = [PipeClass(c, c, big) for c in alive] if big > 0 else []
    if small > 0:
        out += [PipeClass(q, c, small) for q in dead for c in alive]
    return out


def hier_pipeline(
    b: Builder,
    servers: Sequence[ServerInfo],
    shares: Mapping[int, Fraction],
    pieces: int,
    *,
    net_window: int = 0,
    timing: float = 0.0,
    size: Fraction | None = None,
    relay: Fraction = Fraction(0),
    flat_last: int = 0,
    own_lag: int | None = None,
    nvlink_channels: int = 1,
    relay_sum: bool = False,
    degraded_last: bool = False,
) -> list[PipeClass]:
    """Add the pipelined hierarchical AllReduce of the whole buffer to ``b``.

    ``shares``: owner shares (sum 1); ``pieces``: pipeline depth; ``net_window``: a
    GPU's partials of piece ``k`` wait for its returns of piece ``k − net_window`` (0 =
    no window; see :func:`default_net_window`). The caller checks
    :func:`pipeline_blocker` first. Returns the classes of every piece.

    ``relay``: the part of every piece each dead-rail GPU of the degraded servers
    reduces and relays (0 = off, the ring; see the module docs and
    :func:`default_relay`).

    ``own_lag``: a degraded owner returns the results of its share of piece ``k`` only
    after its partials of piece ``k + own_lag`` have left (``None``: at once, with its
    piece). Its egress, which otherwise idles at the end of the run once its last
    partials have left, then still has results to send; the other servers take them out
    of their NVLink all-gathers and pass them round their GPUs in a ring of their own
    (on :data:`LATE_CHANNEL`; in one hop in the ``flat_last`` pieces); they are outside
    ``net_window``, whose partials would otherwise wait for them. The same as the
    hierarchical ring's ``sliver_lag`` (:func:`~resilientcc.schedules.hier_ring.hier_ring`);
    OptCC's default :func:`default_own_lag`.

    ``relay_sum``: a relaying dead GPU sums the partials of a holder's chunk from every
    GPU but the holder and adds that sum into the holder's own partial, instead of
    reducing all of them and copying the total over; the holder's own partial then makes
    no round trip, and with ``relay = 1/G`` every port of the degraded server moves
    ``2(G − 1)/G`` of a piece each way (see :func:`default_relay_sum`).

    ``degraded_last``: among the network partials reduced into each owner's shard (which
    the IR orders), the degraded servers' come last, so that the healthy servers'
    partials do not wait behind them (see :func:`default_relay_sum`).

    ``nvlink_channels``: piece ``k``'s NVLink rings run on lane ``k mod nvlink_channels``
    (:func:`nvlink_ring_channel`), so that a piece's ring step does not wait behind the
    previous piece's steps on one FIFO connection (see :func:`default_healthy_pieces`;
    OptCC's default :func:`default_healthy_lanes` with no degraded server, else 1).

    ``flat_last``: the last this many pieces end with a flat NVLink all-gather on every
    server that does not relay: each GPU copies what it holds straight to every other
    GPU of its server, one hop instead of the ring's ``G − 1``, over ``G − 1``
    connections (see :func:`default_pipeline_flat_tail`).

    ``timing`` (``> 0``, with ``size`` in bytes) orders each connection by estimated
    time instead of piece by piece: piece ``k`` starts at ``k · timing · P`` (``P``: a
    piece's estimated time on a healthy NIC, or its NVLink reduce-scatter pass if
    longer) and its NVLink ring steps follow one latency plus one step's bytes apart, so
    a ring connection sends the first steps of the next pieces while the last steps of
    a piece wait for their hops. Piece by piece (``timing = 0``, the default) a piece's
    first step waits behind the previous piece's last, and with small pieces the 7-hop
    latency chain of every piece adds up: 4 × 8 GPUs, 256 MiB, 1 NIC lost, 64 pieces
    1.747 ms (1.67 × the bound, 1.065 × at zero latency). With ``timing`` 0.75 / 1.0 /
    1.25 it took 1.206 / 1.213 / 1.363 ms (32 pieces piece by piece, OptCC's default:
    1.248); 2 NICs lost, 64 pieces, 0.75 / 1.0: 1.260 / 1.245 (default 1.288); 8 × 8
    GPUs, 1 lost, 64 pieces, 0.75 / 1.0: 1.482 / 1.435 (default 1.495). Too large a
    ``timing`` falls back into the latency chain; at 1 GiB (64 pieces of 16 MiB) 0.75 and
    1.0 give the default's 4.486 ms on 4 servers.
    """
    if nvlink_channels < 1:
        raise ScheduleError(f"optcc: nvlink_channels must be at least 1, got {nvlink_channels}")
    g = servers[0].nics
    n = len(servers)
    degraded = next((sv for sv in servers if not sv.healthy), None)
    # the degraded servers (their NICs alike, see pipeline_blocker) share the classes
    slow = {sv.index for sv in servers if not sv.healthy}
    classes = _classes(servers, shares, degraded)
    owners = [sv.index for sv in servers if shares[sv.index] > 0]
    b.order_by_release = True
    piece = Fraction(1, pieces)
    # each server's ring (local GPUs); on ``d`` the dead-rail GPUs own nothing
    ring_ranks = nvlink_rings(servers)

    def local(s: int, cl: PipeClass, t: int) -> int:
        """The local GPU of server ``s`` that holds owner ``t``'s shard of class ``cl``
        between the rings: on rail ``rail_d`` where ``s`` or ``t`` is degraded (a
        degraded owner's shard is exchanged with it on that rail only, so the healthy
        servers hold it there too, with no NVLink hop to the dead rail's GPU)."""
        return servers[s].nic_gpu[cl.rail_d if s in slow or t in slow else cl.rail]

    # position in each server's ring of the GPU that holds each owner's shard of each
    # class (the same every piece)
    slot = {
        s: {
            (i, t): ranks.index(servers[s].ranks[local(s, cl, t)])
            for i, cl in enumerate(classes)
            for t in owners
        }
        for s, ranks in ring_ranks.items()
    }
    # the returns into each GPU, per piece: its partials of piece k wait for those of k − W
    returns_into: dict[tuple[int, int], list[int]] = {}
    # servers whose dead-rail GPUs reduce a part ``relay`` of every piece (direct NVLink
    # stages): position of each such GPU in the server's ring, and what each owes
    relay = Fraction(relay)
    if relay < 0 or (relay > 0 and degraded is None):
        raise ScheduleError(
            f"optcc: relay must be 0, or positive with a degraded server, got {relay}"
        )
    lost = g - len(degraded.alive) if degraded is not None else 0
    if relay > 0 and not 0 < lost * relay < 1:
        raise ScheduleError(
            f"optcc: relay {relay} needs dead NICs on the degraded servers, each dead GPU"
            f" reducing less than 1/{lost or 1} of a piece"
        )
    relayed: dict[int, list[int]] = {}
    for s in slow if relay > 0 else ():
        pos_of = {r: p for p, r in enumerate(ring_ranks[s])}
        sv = servers[s]
        relayed[s] = [pos_of[sv.rail_rank(q)] for q in range(g) if q not in sv.alive]
    debt = {
        s: {(q, p): Fraction(0) for q in helpers for p in range(g) if p not in helpers}
        for s, helpers in relayed.items()
    }
    # what each helper owes each holder more every piece
    accrual = {s: relay / pieces / (g - len(helpers)) for s, helpers in relayed.items()}

    # release times: a piece's start, its NVLink ring steps, the network stage after the
    # reduce-scatter, and each network stage; piece by piece (pieces 1000 apart, stages
    # 100, steps 1) or, with ``timing``, estimated seconds
    if timing > 0:
        if size is None:
            raise ScheduleError("hier_pipeline: timing needs the message size")
        pb = float(size) / pieces  # bytes of a piece
        w_max = float(max(shares.values()))
        # a piece's period (a healthy NIC's share of it, or one NVLink ring pass), one
        # NVLink ring step, one network stage
        period = timing * max(
            pb * (1 + (n - 2) * w_max) / g / LINE_NIC_BW, pb * (g - 1) / g / LINE_NVL_BW
        )
        step = NVL_LAT + pb / g / LINE_NVL_BW
        lead = (g - 1) * step
        net_t = NET_LAT + pb / g / LINE_NIC_BW * (n - 1) * w_max
    else:
        period, step, lead, net_t = 1000.0, 1.0, 100.0, 100.0
    sent_from: dict[tuple[int, int], list[int]] = {}
    lagged: list[tuple[int, int, int, list[tuple[int, int]], float]] = []
    for k in range(pieces):
        t0 = k * period
        t_net = t0 + lead
        t_back = t_net + net_t
        t_ag = t_back + net_t
        chunk = {
            (i, t): b.chunk(piece * cl.size * shares[t])
            for i, cl in enumerate(classes)
            for t in owners
        }
        ring_groups: dict[int, list[list[int]]] = {s: [[] for _ in range(g)] for s in ring_ranks}
        for (i, t), c in chunk.items():
            for s, groups in ring_groups.items():
                groups[slot[s][i, t]].append(c)
        reducer: dict[int, int] = {}
        rs_ch = nvlink_ring_channel(k % nvlink_channels)
        for s, owed in debt.items():
            for key in owed:
                owed[key] += accrual[s]
        for s, ranks in ring_ranks.items():
            if s in relayed:
                reducer.update(
                    _relay_reduce(
                        b,
                        ranks,
                        ring_groups[s],
                        relayed[s],
                        debt[s],
                        release=t0,
                        step=step,
                        add_into_holder=relay_sum,
                    )
                )
            else:
                b.ring_reduce_scatter(ranks, ring_groups[s], rs_ch, release=t0, step_release=step)
        for (i, t), c in chunk.items():
            cl = classes[i]
            owner = servers[t].ranks[local(t, cl, t)]
            sources = [(t + j) % n for j in range(1, n)]
            if degraded_last:
                sources.sort(key=lambda x: x in slow)  # stable: rotated order otherwise
            peers = [
                (servers[s].ranks[local(s, cl, t)], cl.rail_d if slow & {s, t} else cl.rail)
                for s in sources
            ]
            for rank, rail in peers:
                tid = b.add(
                    rank,
                    owner,
                    c,
                    REDUCE,
                    rail,
                    net=True,
                    deps=returns_into.get((k - net_window, rank), ()) if net_window else (),
                    release=t_net,
                )
                sent_from.setdefault((k, rank), []).append(tid)
            if own_lag is not None and t in slow:
                lagged.append((k, c, owner, peers, t_back))
                continue
            for rank, rail in peers:
                tid = b.add(owner, rank, c, COPY, rail + g, net=True, release=t_back)
                returns_into.setdefault((k, rank), []).append(tid)
        flat = k >= pieces - flat_last
        # with ``own_lag`` the degraded owners' results come late and have broadcasts of
        # their own on the other servers, out of the all-gathers that would wait for them
        late = {c: t for (_i, t), c in chunk.items() if t in slow} if own_lag is not None else {}
        for s, ranks in ring_ranks.items():
            groups = ring_groups[s]
            if late:
                groups = [[c for c in grp if late.get(c, s) == s] for grp in groups]
            if s in relayed:
                _relay_gather(b, ranks, groups, reducer, release=t_ag, step=step)
            elif flat:
                b.flat_all_gather(ranks, groups, rs_ch + 1, release=t_ag)
            else:
                b.ring_all_gather(ranks, groups, rs_ch + 1, release=t_ag, step_release=step)
    server_of = {r: sv.index for sv in servers for r in sv.ranks}
    for k, c, owner, peers, t_back in lagged:
        gate_piece = min(pieces - 1, k + (own_lag or 0))
        gate = sent_from.get((gate_piece, owner), ())
        # no earlier in the id order than the partials it waits for
        at = max(t_back, gate_piece * period + lead)
        for rank, rail in peers:
            b.add(owner, rank, c, COPY, rail + g, net=True, release=at, deps=gate)
            # to the rest of the server: a ring of its own, or flat in the flat tail
            here = ring_ranks[server_of[rank]]
            if k < pieces - flat_last:
                groups = [[c] if r == rank else [] for r in here]
                b.ring_all_gather(here, groups, LATE_CHANNEL, release=at + net_t, step_release=step)
            else:
                rest = [r for r in here if r != rank]
                b.tree_bcast([rank, *rest], c, channel=LATE_CHANNEL, release=at + net_t)
    return classes


def nvlink_ring_channel(lane: int) -> int:
    """The channel of the NVLink reduce-scatter ring of :func:`hier_pipeline`'s ``lane``;
    its all-gather ring uses the next one.

    Lane 0 is channels 0 and 1; lane ``j ≥ 1`` is :data:`NVLINK_LANE_BASE` ``+ 2(j − 1)``
    and the one after, clear of the relay's and the late results' channels 2 and 3.

    >>> tuple(nvlink_ring_channel(j) for j in range(4))
    (0, 4, 6, 8)
    """
    return 0 if lane == 0 else NVLINK_LANE_BASE + 2 * (lane - 1)


def default_own_lag(
    servers: Sequence[ServerInfo], relay: Fraction, pieces: int, size: Fraction
) -> int | None:
    """OptCC's ``own_lag`` for :func:`hier_pipeline`, around one degraded server from
    :data:`OWN_LAG_MIN_SERVERS` servers and :data:`OWN_LAG_MIN_PIECES` pieces on and
    without the relay: 1 piece, 2 from :data:`OWN_LAG_TWO_BYTES` on; with the relay of
    two dead rails (:data:`RELAY_TWO_DEAD`), and of one from
    :data:`OWN_LAG_RELAY_MIN_SERVERS` servers on, 0: the results of a piece after its
    partials; else ``None`` (the results leave with their piece).

    With the relay of one dead rail, × the bound, ``None`` / 0: 5 servers, 256 / 512
    MiB / 1 GiB 1.192 / 1.129 / 1.069 → 1.111 / 1.070 / 1.052; 6 servers (then
    pipelined, :data:`~resilientcc.schedules.optcc.ONE_DEAD_PIPELINE_MAX_SERVERS`) 1.112
    / 1.070 / 1.051 with 0; but 4 servers 1.137 / 1.082 / 1.059 → 1.130 / 1.089 /
    1.087, where the NVLink of every GPU binds with the NICs, not the straggler's
    egress.

    Measured, × the bound, off / lag 1 / 2 (64 pieces unless it says otherwise): 4 × 8
    GPUs, 2 of 8 NICs lost, 1 GiB 1.079 / 1.069 / 1.063, 256 MiB 1.147 / 1.127 / 1.139,
    64 MiB (16 pieces) 1.503 / 1.419 / 1.421, 32 MiB (8 pieces) 1.901 / 1.830 / 1.832;
    the NICs all at 7/8, 1 GiB 1.064 / 1.034 / 1.036, 256 MiB 1.113 / 1.105 / 1.112; 5
    servers, 2 lost, 1 GiB 1.084 / 1.064 / 1.065, 256 MiB 1.191 / 1.144 / 1.142; NICs at
    7/8, 256 MiB 1.165 / 1.109 / 1.114. Not on 3 servers (2 lost, 1 GiB: 1.083 against
    1.129 with a lag of 1), below 8 pieces (16 MiB, 4 pieces: 2.682 against 2.703 with
    2), with the relay (4 servers, 1 lost, 1 GiB: 1.059 against 1.094 with 2, 1.169
    with one-hop copies of the results) nor around several degraded servers (servers 0
    and 1 losing a NIC each, 256 MiB: 1.164 against 1.701).

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> four = server_view(fail_nics(hierarchical(4, 8), 0, 2))
    >>> tuple(default_own_lag(four, Fraction(0), p, Fraction(2**28)) for p in (4, 8, 64))
    (None, 1, 1)
    >>> default_own_lag(four, Fraction(0), 64, Fraction(2**30))
    2
    >>> default_own_lag(four, Fraction(1, 8), 64, Fraction(2**30))  # two dead rails
    0
    >>> one = server_view(fail_nics(hierarchical(4, 8), 0, 1))
    >>> default_own_lag(one, Fraction(1, 9), 64, Fraction(2**30)) is None
    True
    >>> five = server_view(fail_nics(hierarchical(5, 8), 0, 1))
    >>> default_own_lag(five, Fraction(1, 9), 64, Fraction(2**30))
    0
    """
    degraded = [sv for sv in servers if not sv.healthy]
    if len(degraded) != 1 or len(servers) < OWN_LAG_MIN_SERVERS or pieces < OWN_LAG_MIN_PIECES:
        return None
    if relay > 0:
        dead = degraded[0].nics - len(degraded[0].alive)
        if _two_dead_relay(servers, degraded, dead) or len(servers) >= OWN_LAG_RELAY_MIN_SERVERS:
            return 0
        return None
    return 2 if size >= OWN_LAG_TWO_BYTES else 1


def default_relay(gpus: int, dead: int) -> Fraction:
    """The part of a piece each dead-rail GPU of the straggler reduces (:func:`hier_pipeline`).

    With a direct (all-to-all) NVLink stage on the straggler, a GPU that reduces a part
    ``x`` of a piece moves ``1 + (G − 2)x`` of it each way; a dead-rail GPU that reduces
    ``u`` and relays it to and from an alive GPU moves ``1 + (G − 1)u``, and each alive GPU
    ``1 + (G − 2)v + L·u/(G − L)`` with ``v = (1 − L·u)/(G − L)``. Equal loads give ``u``;
    it is used where it lowers the busiest port's load by :data:`RELAY_MIN_GAIN` or more
    against the ring's ``2 − 1/(G − L)`` (the dead GPUs own nothing, spread by
    :func:`ring_order`), else 0. With 8 GPUs that is one dead rail (``u = 1/9``: 16/9
    against 13/7 of a piece); with two, ``u = 3/26`` would save 1.4 % of the port and
    measured no faster (4 × 8 GPUs, 1 GiB, 128 pieces: 4.639 against 4.634 ms), but
    :func:`pipeline_relay` relays 1/8 there with ``own_lag`` 0.

    >>> default_relay(8, 1), default_relay(8, 2), default_relay(8, 4), default_relay(4, 1)
    (Fraction(1, 9), Fraction(0, 1), Fraction(0, 1), Fraction(1, 5))
    """
    g, lost = gpus, dead
    if not 0 < lost < g or g < 3 or 2 * lost >= g:
        return Fraction(0)
    u = Fraction(g - 2, (g - 1) * (g - lost) + (g - 3) * lost)
    direct = 1 + (g - 1) * u
    ring = 2 - Fraction(1, g - lost)  # the dead GPUs spread (ring_order)
    return u if direct <= (1 - RELAY_MIN_GAIN) * ring else Fraction(0)


def pipeline_depth(size: Fraction, servers: int, relay: Fraction) -> tuple[int, float]:
    """``(pieces, timing)`` of the pipelined schedule around a degraded server.

    Deep: twice :func:`default_pipeline_pieces`, ordered by estimated time
    (``timing`` :data:`DEEP_TIMING`; :func:`hier_pipeline`), where that pays: up to 256
    MiB (:data:`DEEP_MAX_BASE_PIECES` pieces by default), and with the relay on
    :data:`RELAY_DEEP_SERVERS` servers at any size, the relay having taken the
    straggler's NVLink off the byte floor. Else the default depth, piece by piece.
    Measured, ratio to the bound, default → deep: 256 MiB, 4 servers, 1 / 2 / 3 NICs
    lost 1.182 (with the relay) / 1.199 / 1.261 → 1.149 / 1.160 / 1.208, 3 servers, 1
    (with the relay) / 2 lost 1.180 / 1.221 → 1.141 / 1.163, 5 servers, 2 lost 1.215 → 1.207, 8 servers with
    1 lost on two of them 1.255 → 1.205; 64 MiB, 4 servers, 1 / 2 lost 1.659 / 1.654 →
    1.533 / 1.568. At 1 GiB, 1 lost with the relay, 3 / 4 / 5 servers 1.069 / 1.073 /
    1.087 → 1.091 / 1.058 / 1.071 (6 servers 4.970 → 4.922 ms); 2 lost without it, 4
    servers, 1.079 → 1.087.

    >>> pipeline_depth(Fraction(2**30), 4, Fraction(1, 9)), pipeline_depth(Fraction(2**30), 3, Fraction(1, 9))
    ((128, 1.0), (64, 0.0))
    >>> pipeline_depth(Fraction(2**28), 8, Fraction(0)), pipeline_depth(Fraction(2**30), 4, Fraction(0))
    ((64, 1.0), (64, 0.0))
    """
    k = default_pipeline_pieces(size)
    deep = k <= DEEP_MAX_BASE_PIECES or (
        relay > 0 and RELAY_DEEP_SERVERS[0] <= servers <= RELAY_DEEP_SERVERS[1]
    )
    return (2 * k, DEEP_TIMING) if deep else (k, 0.0)


def default_pipeline_flat_tail(servers: Sequence[ServerInfo], size: Fraction, pieces: int) -> int:
    """Pieces of the pipelined schedule that end with a flat NVLink all-gather (``flat_last``).

    A flat all-gather moves the ring's bytes in one hop instead of ``G − 1``, but each GPU
    sends on ``G − 1`` connections at once, so the pieces in flight share its port
    instead of queueing on one connection: it pays only at the end of the pipeline, where
    nothing waits behind it, and where a piece's ``G − 1`` NVLink latencies weigh against
    the buffer. Around one degraded server on :data:`FLAT_TAIL_MIN_SERVERS` servers or
    more, up to :data:`FLAT_TAIL_ONE_MAX_BYTES` (512 MiB; below): the pieces in the last
    :data:`FLAT_TAIL_BYTES`, at least one; the same around several degraded servers (seen
    alike) up to 256 MiB (where the pipeline is deep by size, :func:`pipeline_depth`)
    from :data:`FLAT_TAIL_SEVERAL_MIN_SERVERS` servers where each keeps half its NICs or
    more, and with no degraded server at every size (both below); else none. Measured
    with server 0 losing 1 / 2 of 8 NICs, ratio to the bound, none → default:

    =======  ==========================  ==========================
    servers  size                        1 / 2 NICs lost
    =======  ==========================  ==========================
    4        64 MiB (6 of 16 pieces)     1.533 / 1.568 → 1.437 / 1.503
    4        128 MiB (6 of 32)           1.287 / 1.294 → 1.246 / 1.260
    4        256 MiB (6 of 64)           1.149 / 1.160 → 1.137 / 1.147
    5        256 MiB                     1.208 / 1.207 → 1.192 / 1.191
    6        256 MiB                     1.231 / 1.231 → 1.214 / 1.220
    =======  ==========================  ==========================

    4 servers, 256 MiB, the last 0 / 4 / 6 / 7 / 8 / 10 / 12 of 64 pieces: 1 lost 1.149 /
    1.150 / 1.137 / 1.134 / 1.144 / 1.171 / 1.193, 2 lost 1.160 / 1.157 / 1.147 / 1.142 /
    1.140 / 1.143 / 1.142 (hence 24 MiB, clear of the cliff). Not on 3 servers (256
    MiB, 1.141 / 1.163 → 1.174 / 1.183) nor with several degraded servers above 256 MiB
    (below).

    Up to 512 MiB since 2026-11-27 (before, up to 256 MiB: at 512 MiB it had measured
    1.082 / 1.153 → 1.086 / 1.142 on 4 servers, before the relay and the results held
    back). Fitted at 512 MiB, one server losing 1 / 2 / 3 NICs or all its NICs at 7/8 /
    3/4, × the bound, none → the last 24 MiB flat: 4 servers 1.0798 / 1.0686 / 1.1720 /
    1.0935 / 1.1019 → 1.0688 / 1.0597 / 1.1742 / 1.0793 / 1.0829; 5 servers 1.0655 /
    1.0690 / 1.1276 / 1.0926 / 1.1190 → 1.0575 / 1.0616 / 1.1271 / 1.0773 / 1.1040; 6
    servers, 1 lost, 1.0685 → 1.0596 (the others run the hierarchical ring): 10 of 11
    faster, by 0.04–1.7 %. Held out at 384 MiB: 10 of 11 faster (by 0.1–2.0 %), 3 lost
    on 4 servers 0.4 % slower. Not above: at 768 MiB 8 of 11 faster (by 0.2–0.9 %) but 4
    servers with 1 lost and 4 / 5 servers with 3 lost 0.1–0.4 % slower, and at 1 GiB
    mixed (4 servers, 1 / 2 / 3 lost 1.0501 / 1.0484 / 1.0856 → 1.0513 / 1.0476 /
    1.0946; 5 servers 1.0485 / 1.0492 → 1.0455 / 1.0456). With 3 lost it is slower on 4
    servers at every size from 384 MiB, by 0.2–0.4 % (one rule for every loss kept).

    With no degraded server the last 24 MiB are flat at every size and on any number of
    servers (measured 2026-11-27; before, none). × the bound, none → the last 12 / 24 MiB
    flat: 4 × 8 GPUs, 32 / 64 / 128 / 256 / 512 MiB / 1 GiB 1.789 / 1.382 / 1.175 / 1.072 /
    1.027 / 1.020 → 1.698 / 1.322 / 1.145 / 1.056 / 1.021 / 1.017 and 1.637 / 1.304 /
    1.136 / 1.052 / 1.019 / 1.015; 256 MiB, 2 / 3 / 5 / 6 / 7 servers 1.078 / 1.053 /
    1.105 / 1.106 / 1.110 → 1.076 / 1.043 / 1.091 / 1.092 / 1.095 and 1.078 / 1.035 /
    1.086 / 1.091 / 1.095; 1 GiB, 3 / 5 / 6 / 7 servers 1.027 / 1.040 / 1.037 / 1.039 →
    1.026 / 1.035 / 1.036 / 1.036; servers of 4 or 2 GPUs (where the ring's 3 or 1 hops
    leave little to save) unchanged or within 0.1 %. With NVLink lanes the flat copies use
    their piece's lane's all-gather channel.

    Around several degraded servers (measured 2026-11-27, where it had measured slower
    before the relay and the results held back: 1 NIC lost on servers 0 and 1, 4
    servers, 256 MiB, 1.164 → 1.207): fitted on two degraded servers with 1 / 2 / 4 NICs
    lost or every NIC at half speed, 3–6 servers, 64–256 MiB, 36 of 38 faster (up to
    6.1 %), one equal, one 0.08 % slower; at 512 MiB and 1 GiB mixed (4 servers 0.3–0.8 %
    slower), so not there. Held out (48 / 96 / 192 MiB, three degraded servers, 3 of 8
    lost, NICs at 3/4, NIC 1 lost on two, 6 of 8 lost): 40 of 49 faster (median −2.3 %),
    the 9 slower all with 6 of 8 NICs lost (+0.1 to +0.8 %: two holders each copying to
    seven GPUs), hence half the NICs; degraded servers that lost different NICs, seen
    alike: 5 of 8 faster (up to 5.8 %), 3 slower on 4 servers at 128 / 256 MiB (+0.1 to
    +0.6 %).

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> four = server_view(fail_nics(hierarchical(4, 8), 0, 1))
    >>> default_pipeline_flat_tail(four, Fraction(2**28), 64), default_pipeline_flat_tail(four, Fraction(2**30), 128)
    (6, 0)
    >>> default_pipeline_flat_tail(four, Fraction(2**29), 128)  # the last 24 of 512 MiB
    6
    >>> default_pipeline_flat_tail(four, Fraction(2**24), 4)  # every piece
    4
    >>> default_pipeline_flat_tail(server_view(hierarchical(4, 8)), Fraction(2**30), 64)
    2
    """
    degraded = [sv for sv in servers if not sv.healthy]
    if degraded:  # (with none: at every size, on any number of servers)
        if len(degraded) == 1:
            least, big = FLAT_TAIL_MIN_SERVERS, size > FLAT_TAIL_ONE_MAX_BYTES
        else:
            least = FLAT_TAIL_SEVERAL_MIN_SERVERS
            big = default_pipeline_pieces(size) > DEEP_MAX_BASE_PIECES
        if len(servers) < least or big:
            return 0
        if len(degraded) > 1 and any(2 * len(sv.alive) < sv.nics for sv in degraded):
            return 0  # several degraded servers with few holders each: they keep their rings
    return min(pieces, max(1, round(FLAT_TAIL_BYTES * pieces / size)))


def pipeline_relay(servers: Sequence[ServerInfo], size: Fraction) -> Fraction:
    """:func:`default_relay` for the degraded servers of ``servers`` and ``size`` bytes.

    0 where none lost a NIC; above :data:`RELAY_MAX_SERVERS` servers, where it measured
    slower (8 × 8 GPUs, 256 MiB, 32 pieces, 1 NIC lost on each of two / three servers:
    1.300 / 1.271 × the bound against 1.255 / 1.216 without it); and below
    :data:`RELAY_MIN_BYTES`, where the pipeline's fill and drain outweigh the floor (4 ×
    8 GPUs, 1 NIC lost, 64 MiB, both 16 pieces deep: 410 against 400 µs).

    With two of 8 NICs lost on one server (from :data:`RELAY_TWO_MIN_SERVERS` servers
    on) :func:`default_relay` gives 0, but :data:`RELAY_TWO_DEAD` (1/8) pays together with
    ``own_lag`` 0 (:func:`default_own_lag`): the straggler's results of a piece then leave
    after its partials of the same piece. × the bound, without the relay (``own_lag`` 1
    or 2) / relay 1/8 and ``own_lag`` 0: 4 × 8 GPUs, 256 MiB 1.127 / 1.122, 512 MiB
    1.136 / 1.081, 1 GiB 1.063 / 1.059; 5 × 8 GPUs, 256 MiB 1.144 / 1.111, 1 GiB 1.065 /
    1.060. Either alone did not pay (4 servers, 1 GiB: the relay with the lag of 2 or
    none 1.075, ``own_lag`` 0 without the relay 1.069; the relay with ``own_lag`` 1
    1.061), nor other parts (1/10, 3/26, 2/15, 1/7 with ``own_lag`` 0: 1.076 / 1.063 /
    1.088 / 1.150; the straggler's dead GPUs then move ``15/8`` of a piece where the
    ring's busiest port moves ``11/6``, so it is the order, not the floor), nor 3
    servers (1 GiB 1.112 against 1.083), nor 3 lost (4 servers, 1 GiB, 1/8 or 1/10:
    1.089 / 1.097 against 1.085, though 1.158 / 1.151 against 1.199 at 256 MiB).

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> four = server_view(fail_nics(hierarchical(4, 8), 0, 2))
    >>> pipeline_relay(four, Fraction(2**28)), pipeline_relay(four[:3], Fraction(2**28))
    (Fraction(1, 8), Fraction(0, 1))
    """
    degraded = [sv for sv in servers if not sv.healthy]
    lost = {sv.nics - len(sv.alive) for sv in degraded}
    if len(lost) != 1 or len(servers) > RELAY_MAX_SERVERS or size < RELAY_MIN_BYTES:
        return Fraction(0)
    dead = lost.pop()
    if _two_dead_relay(servers, degraded, dead):
        return RELAY_TWO_DEAD
    return default_relay(servers[0].nics, dead)


def default_relay_sum(servers: Sequence[ServerInfo], relay: Fraction) -> bool:
    """OptCC's ``relay_sum`` and ``degraded_last`` (:func:`hier_pipeline`): both where
    it relays :data:`RELAY_TWO_DEAD` around two dead rails (:func:`pipeline_relay`).

    There the relay's copies left the relaying GPUs the busiest ports (``15/8`` of a
    piece: the byte floor, 1.042 × the bound on 4 × 8 GPUs). Summed into the holders'
    own partials, every port of the degraded server moves ``7/4``, and its NICs bind
    (the floor 1.000); then the healthy servers' partials must not wait behind its
    partials in the reductions into each owner's shard, hence ``degraded_last``. × the
    bound, neither → both (either alone): 4 servers, 256 MiB / 512 MiB / 1 GiB / 2 GiB
    1.129 / 1.083 / 1.060 / 1.060 → 1.112 / 1.069 / 1.048 / 1.036 (1 GiB: the sum alone
    1.060, the order alone 1.055); 5 servers 1.109 / 1.068 / 1.055 / 1.039 → 1.119 /
    1.069 / 1.049 / 1.035. With one dead rail (the healthy servers' NVLink binds) they
    measured both ways (4 servers, 1 GiB 1.050 → 1.054, 256 MiB 1.122 → 1.118).

    >>> from resilientcc.topology import hierarchical, fail_nics
    >>> from resilientcc.schedules._build import server_view
    >>> two = server_view(fail_nics(hierarchical(4, 8), 0, 2))
    >>> default_relay_sum(two, RELAY_TWO_DEAD), default_relay_sum(two, Fraction(0))
    (True, False)
    """
    degraded = [sv for sv in servers if not sv.healthy]
    if relay != RELAY_TWO_DEAD or not degraded:
        return False
    return _two_dead_relay(servers, degraded, degraded[0].nics - len(degraded[0].alive))


def _two_dead_relay(
    servers: Sequence[ServerInfo], degraded: Sequence[ServerInfo], dead: int
) -> bool:
    """Whether OptCC relays :data:`RELAY_TWO_DEAD` (see :func:`pipeline_relay`)."""
    return (
        len(degraded) == 1
        and dead == 2
        and servers[0].nics == 8
        and len(servers) >= RELAY_TWO_MIN_SERVERS
    )


def _relay_reduce(
    b: Builder,
    ranks: Sequence[int],
    groups: Sequence[Sequence[int]],
    helpers: Sequence[int],
    debt: dict[tuple[int, int], Fraction],
    *,
    release: float,
    step: float,
    add_into_holder: bool = False,
) -> dict[int, int]:
    """A direct NVLink reduce-scatter of one piece on a server with dead-rail GPUs.

    ``groups[p]``: the chunks the GPU at position ``p`` of ``ranks`` holds for the
    network (empty for the dead-rail GPUs, ``helpers``: their positions). Each helper
    reduces some of every alive holder's chunks (as many bytes as ``debt[(helper,
    holder)]`` has accrued: error diffusion over the pieces) and copies the sum to the
    holder; the holder reduces the rest itself. Every reducer receives the partials one
    source per step in rotated order. With ``add_into_holder`` a helper leaves the
    holder's own partial out of its sum and adds the sum into it (``hier_pipeline``'s
    ``relay_sum``). Returns ``{chunk: helper position}`` for the chunks a helper reduced.
    """
    g = len(ranks)
    red = {p: list(grp) for p, grp in enumerate(groups)}  # chunks each position reduces
    by_helper: dict[int, int] = {}
    relayed: list[tuple[int, int, int]] = []  # (helper, holder, chunk), in that order
    for p, grp in enumerate(groups):
        for q in helpers if grp else ():
            owed = debt[(q, p)]
            for c in list(red[p]):
                size = b.chunk_sizes[c]
                if 2 * owed >= size:
                    red[p].remove(c)
                    red[q].append(c)
                    by_helper[c] = q
                    relayed.append((q, p, c))
                    owed -= size
            debt[(q, p)] = owed
    holder = {c: p for _q, p, c in relayed} if add_into_holder else {}
    for j in range(1, g):
        for p in range(g):
            src = (p + j) % g
            for c in red[p]:
                if holder.get(c) != src:
                    b.add(ranks[src], ranks[p], c, REDUCE, 0, release=release + (j - 1) * step)
    last = REDUCE if add_into_holder else COPY
    for q, p, c in relayed:
        b.add(ranks[q], ranks[p], c, last, 2, release=release + g * step)
    return by_helper


def _relay_gather(
    b: Builder,
    ranks: Sequence[int],
    groups: Sequence[Sequence[int]],
    by_helper: dict[int, int],
    *,
    release: float,
    step: float,
) -> None:
    """The direct NVLink all-gather after :func:`_relay_reduce` (helpers get theirs back first)."""
    g = len(ranks)
    for p, grp in enumerate(groups):
        for c in grp:
            root = by_helper.get(c, p)
            if root != p:
                b.add(ranks[p], ranks[root], c, COPY, 3, release=release)
            for j in range(1, g):
                dst = (root + j) % g
                if dst != p:
                    b.add(ranks[root], ranks[dst], c, COPY, 1, release=release + j * step)
