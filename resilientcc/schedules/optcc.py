"""OptCC: a pipelined, bandwidth-aware AllReduce around degraded servers.

Designed from the lower bound (DESIGN.md §4). With one straggler at ``β·B`` among ``N``
servers of egress ``B``, ``T_LB = M/B · max(1/β, 2(N−1)/(N−1+β))``. The schedule is a
*direct* (one network hop each way) reduce-scatter + all-gather whose shard sizes are
chosen so that every server's network time is equal:

* the buffer is cut into ``pieces`` pipeline pieces; each piece is split among the
  servers, server ``t`` owning a share ``w_t`` (``Σ w_t = 1``);
* per piece and shard, the four stages are

  1. **scatter / intra-server reduce** — on every server ``s ≠ t`` the GPUs reduce
     the shard over NVLink (binomial tree) into the GPU whose NIC carries it to ``t``;
  2. **network reduce** — that GPU sends the server's partial sum straight to ``t``
     (one network hop), where it is reduced into a GPU of ``t``; ``t`` then reduces its
     GPUs (tree, the remote partials included) into the shard's owner GPU;
  3. **all-gather inside** ``t`` — the owner copies the result to its server's GPUs
     (binomial tree);
  4. **return** — the GPU of ``t`` on the same rail sends the result back to ``s``
     (one hop), which copies it to its GPUs (NVLink, binomial tree).

Both broadcasts are binomial trees (depth ``log2 G``, every GPU sends at most
``log2 G`` copies), not flat (the root sends ``G − 1`` copies): a flat broadcast loads
the root's NVLink uplink ``G − 1`` times, and with every server's NVLink ~80 % busy at
the bound that delays the results, above all those the straggler waits for (1 GiB,
4 × 8 GPUs, 4 NICs lost, 12 pieces: 1.32 → 1.22 × the bound; 8 servers, 1 NIC lost:
flat 9.97 ms, trees with balancing and a window 6.74 ms).

Server ``s`` sends ``(1 − w_s)·M`` of partial sums and ``(N−1)·w_s·M`` of results, and
receives as much, so its network time is ``M·(1 + (N−2)·w_s)/B_s``. Equalising these
times (water-filling) gives ``Σ_s (1 + (N−2) w_s) = 2(N−1)``: the schedule moves exactly the
``2(N−1)·M`` bytes the bound says are necessary, spread in proportion to bandwidth, so its
bandwidth time equals the bound ``2(N−1)M/Σ B_s``. A straggler's share is zero when
``β ≤ β* = (N−1)/(2N−3)``; then it only pushes ``M`` out and pulls ``M`` in, the other
term of the bound. At ``β = 1`` the shares are equal.

Inside a server, traffic with each peer is spread over the NICs alive at both ends;
between two healthy servers the rails carry weights ``λ_c`` chosen so that every NIC of
a healthy server carries the same load once the degraded servers' traffic (which can use
only their alive NICs) is added. Remote partials destined to one GPU are capped
(``max_serial``) and the rest spread over other GPUs of the owner, so reductions into one
buffer (which must be ordered, to be race-free) never form long chains.

Pipelining: pieces are released one after the other (ids follow the estimated start
times), so a straggler's NICs send from the first piece on and receive until the last.

**Decoupled straggler** (the regime ``β ≤ β*`` with one straggler ``d``, which owns
nothing; OptCC's default there above :data:`PIPELINE_MAX_SERVERS` servers, and
below with ``pipeline=False``). In the four stages above ``d`` gets its results
back only after its own partial has crossed its slow egress, been reduced and
broadcast: its ingress waits for its egress, and the pipeline's fill and drain land on
the bound's bottleneck. Instead,
for each chunk owned by ``t``:

* ``d``'s partial ``c_d`` is *staged*: copied (not reduced) into the GPU ``q`` of ``t``
  on the rail ``d`` sends on, after ``q``'s own data has gone up ``t``'s tree;
* ``t``'s tree therefore yields ``P``, the sum of everyone but ``d``; ``P`` goes back to
  ``d`` at once, from the GPU of ``t`` on a *second* alive rail of ``d``, into ``d``'s
  GPU on that rail, which adds ``c_d`` over NVLink: ``d``'s result;
* ``t`` adds ``P`` into ``q`` (``q = P + c_d``) and broadcasts that to its GPUs and to
  the other healthy servers.

Both network paths of ``d`` start and end on the GPU of the NIC they use (no NVLink
hop, whose ports many tree flows share), ``d``'s egress waits only for ``d``'s own
trees, and its ingress only for the healthy servers' reduce-scatter, so both of ``d``'s
directions stream from the start to the end. The bytes are those of the bound (``M``
out and ``M`` in for ``d``). With every server's NVLink busy, the trees are *balanced*
(:meth:`~resilientcc.schedules._build.Builder.arrange`: the positions with most children
go to the GPUs that have moved least), and a credit ``window`` keeps at most two pieces
of trees in flight per server so that early pieces are not slowed by later ones
(1 GiB, 4 × 8 GPUs, 4 NICs lost: 1.20 × the bound before, 1.12 × with these changes).

**Pipelined hierarchical** (:mod:`~resilientcc.schedules.hier_pipeline`; the default up
to :data:`PIPELINE_MAX_SERVERS` servers with no degraded server, or one whose NICs are
all slowed alike and that owns a shard, and below :data:`SLIVER_MIN_SERVERS` servers
with one that has lost whole NICs and owns a shard; where it owns nothing the
hierarchical ring below is, and so it is with dead NICs from
:data:`SLIVER_MIN_SERVERS` servers on). Intra-server ring
reduce-scatter, the one-hop network exchange with the same shares, and a ring
all-gather, pipelined over up to 64 pieces so that
NVLink and the NICs are busy at once (1 GiB, 4 × 8 GPUs: 4.243 ms without failures,
1.02 × the bound; 1 NIC lost 4.482 ms, 1.07 ×, where the schedules below took 5.627;
8 × 8 GPUs: 4.866 ms without failures, 0.92 × NCCL's ring; 1 NIC lost 5.189 ms, 2 lost
5.394, where the split below took 5.854 and 6.353; 4 lost 5.815, where the decoupled
direct schedule above took 6.620, and on 4 servers 5.685 against its 5.887; with the
network stage's credit window, :func:`~resilientcc.schedules.hier_pipeline.default_net_window`).

**Rings plus a decoupled tail** (exactly one degraded server, coupled regime). The direct
schedule's transfers grow as ``N²`` and its dependency chains with them; a fraction ``f``
of the buffer runs instead on NCCL-style flat rings over the NICs alive everywhere
(:func:`~resilientcc.schedules._build.nic_rings`), and ``1 − f`` on the decoupled direct
schedule with only the healthy servers as owners. ``DirectPlan``'s rail weights count the
rings' load on the common rails (``base_load``). It is OptCC's default above
:data:`PIPELINE_MAX_SERVERS` servers where neither the hierarchical ring nor the weighted
ring below runs, and below with ``pipeline=False``. Above
:data:`DEEP_MAX_SERVERS` servers ``f = β``, the part the straggler can carry at full
rate (1 GiB, 8 servers, 1 NIC lost: 5.854 ms against 6.724 ms for the direct schedule
alone); up to it ``f = 2β − 1``, from
the direct schedule alone at ``β = ½`` to rings alone at ``β = 1`` (4 servers, 1 and 2
NICs lost: 5.635 → 5.627 and 5.994 → 5.867 ms at 1 GiB, 1.554 → 1.471 and 1.653 → 1.488
ms at 256 MiB; with ``pipeline=False`` there, the pipelined variant being the default).

**Hierarchical ring** (:mod:`~resilientcc.schedules.hier_ring`; the default where one
server has lost whole NICs, from :data:`SLIVER_MIN_SERVERS` servers on, and wherever one
degraded server, its NICs lost or all slowed alike, is too slow to own a shard,
``β ≤ β*``). The
pipelined hierarchical schedule with the network stage run as rings among the healthy
servers (one flow per NIC and direction, not ``N²``), the straggler decoupled: it owns
no shard of the rings, sends its partial of each shard straight to the owner and gets
the result straight back. Where it can own a part (``β > β*``) it owns a *sliver* of
every class, exchanged in one hop with every owner and sized so that its NICs and the
healthy ones are loaded for the same time, the bound's placement
(:func:`~resilientcc.schedules.hier_ring.default_sliver`; 1 GiB, 8 servers, 1 / 2 NICs
lost: 4.988 / 5.145 ms, 1.045 / 1.061 × the bound, where the pipelined schedule took
5.189 / 5.394; 16 servers, 1 lost: 5.299 where the decoupled ring took 5.483). Before
the sliver, 1 GiB, 16 × 8 GPUs, 1 / 2 / 4 NICs lost: 5.483 / 5.480 / 5.585 ms, against
5.884 (weighted ring), 6.376 (rings plus tail) and 7.489 (direct); 4 and 8 servers with
4 lost (no sliver there, ``β ≤ β*``): 5.497 and 5.569 ms against the pipelined
schedule's 5.685 and 5.815 (but 8 servers, 2 lost, where the straggler owns a share
there, without the sliver: 5.839 against 5.394).
Its pipeline depth is :func:`~resilientcc.schedules.hier_ring.default_ring_pieces`
(smaller pieces on fewer servers); from 8 healthy servers on its rings run both ways.
A straggler whose NICs all run at half speed, 1 GiB: 5.515 ms on 4 servers (1.03 × the
bound) and 5.764 on 16 (1.07 ×, 64 pieces and spacing 3), where the direct schedule took
6.587 and 7.118.

**Weighted ring** (:mod:`~resilientcc.schedules.weighted_ring`; the default above
:data:`PIPELINE_MAX_SERVERS` servers when the one degraded server keeps more than 3/4 of
the bandwidth and the hierarchical ring cannot run, e.g. its NICs are all alive but
slower). Balance's rings, with the segments of the positions just after the
straggler's network hops enlarged so that those hops carry ``β`` times a healthy hop's
bytes: every NIC is then loaded for the same time, 1.004 × the fault-free ring's bytes
on 16 × 8 GPUs with 1 of 8 NICs lost (simulated 5.884 ms, 1.10 × the fault-free ring,
against 6.220 for the rings plus tail: the unequal segments leave the NICs ~9 % idle).

OptCC sees every degraded server through
:func:`~resilientcc.schedules._build.usable_view`: of alive NICs that differ in
bandwidth it uses only the fastest ones worth using (one NIC at half speed among eight
is left out, as if dead: 1 GiB, 4 × 8 GPUs, 9.813 → 4.481 ms).

With no degraded server OptCC is the pipelined hierarchical schedule up to
:data:`PIPELINE_MAX_SERVERS` servers (0.81 × NCCL's ring on 4 × 8 GPUs at 1 GiB, 0.92 ×
on 8 × 8) and NCCL's ring above (the direct schedule measures 1.12 × the ring there), so
at ``β = 1`` it is at most 1.003 × the fault-free ring on 2–8 servers from 1 MiB to 1 GiB
(pieces from :func:`~resilientcc.schedules.hier_pipeline.default_healthy_pieces`; with 8
MiB pieces it was up to 1.10 × on 2 servers at 64 MiB and 1.020 × on 8 at 256 MiB).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from resilientcc.errors import ScheduleError
from resilientcc.schedules._build import (
    Builder,
    ServerInfo,
    common_rails,
    generator_args,
    nic_rings,
    restricted,
    server_view,
    usable_view,
)
from resilientcc.schedules.hier_pipeline import (
    default_healthy_pieces,
    default_net_window,
    hier_pipeline,
    pipeline_blocker,
    pipeline_depth,
    pipeline_relay,
)
from resilientcc.schedules.hier_ring import default_ring_pieces, default_sliver
from resilientcc.schedules.hier_ring import hier_ring as hier_ring_schedule
from resilientcc.schedules.ir import COPY, REDUCE, Schedule
from resilientcc.schedules.ring import ring
from resilientcc.schedules.weighted_ring import weighted_ring as weighted_ring_schedule
from resilientcc.schedules.weighted_ring import weighted_ring_applies
from resilientcc.topology.model import Topology

__all__ = [
    "ALIKE_SLACK",
    "DEEP_MAX_SERVERS",
    "PIPELINE_MAX_SERVERS",
    "SLIVER_MIN_SERVERS",
    "DirectPlan",
    "alike_view",
    "balanced_shares",
    "default_pieces",
    "direct_allreduce",
    "optcc",
    "rail_weights",
    "water_filling_time",
]

#: logical delay of a piece's return stage: piece k+1 scatters before piece k returns
LAG = 1.5

#: up to this many servers the decoupled schedule uses its deepest pipeline, the coupled
#: one leaves its trees unbalanced and the ring part is ``2β − 1`` (not ``β``): each
#: measured best in the simulator
DEEP_MAX_SERVERS = 6

#: from this many servers on, a straggler that lost whole NICs gets the hierarchical ring
#: (with its sliver, :func:`~resilientcc.schedules.hier_ring.default_sliver`), not the
#: pipelined schedule
SLIVER_MIN_SERVERS = 7

#: OptCC's default is the pipelined hierarchical schedule up to this many servers (where
#: it can run); its transfers grow as ``pieces · N² · G²``: 0.5 to 1.2 million on 8 × 8
#: GPUs at 64 pieces (up to three minutes to simulate), four times that on 16 servers
PIPELINE_MAX_SERVERS = 8

#: :func:`alike_view` gives up at most this fraction of the water-filling time to see
#: several degraded servers alike: the pipelined schedule it enables measured 1.18-1.26 ×
#: the bound where the direct schedule took 1.26-1.49 × (4 × 8 GPUs, 256 MiB)
ALIKE_SLACK = Fraction(1, 10)


def balanced_shares(bandwidth: Mapping[int, Fraction]) -> dict[int, Fraction]:
    """Owner shares ``w_s`` that equalise ``(1 + (N−2) w_s) / B_s`` (water-filling).

    Servers too slow to own anything get ``0`` (their time is then ``M/B_s``, the
    other term of the bound).

    >>> w = balanced_shares({0: Fraction(1, 2), 1: Fraction(1), 2: Fraction(1), 3: Fraction(1)})
    >>> w[0], w[1]
    (Fraction(0, 1), Fraction(1, 3))
    >>> balanced_shares({0: Fraction(7, 8), 1: Fraction(1), 2: Fraction(1), 3: Fraction(1)})[0]
    Fraction(11, 62)
    """
    servers = sorted(bandwidth)
    n = len(servers)
    if n == 0:
        return {}
    if n <= 2:
        tot = sum((bandwidth[s] for s in servers), Fraction(0))
        return {s: bandwidth[s] / tot for s in servers}
    active = list(servers)
    while True:
        # Σ_active (T B_s − 1) = N − 2  with T in units of M
        tot = sum((bandwidth[s] for s in active), Fraction(0))
        t = Fraction(n - 2 + len(active)) / tot
        drop = [s for s in active if t * bandwidth[s] < 1]
        if not drop:
            break
        active = [s for s in active if s not in drop]
    return {s: ((t * bandwidth[s] - 1) / (n - 2) if s in active else Fraction(0)) for s in servers}


def water_filling_time(bandwidth: Mapping[int, Fraction]) -> Fraction:
    """``max_s (1 + (N−2) w_s) / B_s`` with the shares of :func:`balanced_shares`: the
    time (in units of ``M``) of the bound's water-filling on these server bandwidths.

    >>> water_filling_time({0: Fraction(1, 2), 1: Fraction(1), 2: Fraction(1), 3: Fraction(1)})
    Fraction(2, 1)
    >>> water_filling_time({0: Fraction(1), 1: Fraction(1), 2: Fraction(1)})
    Fraction(4, 3)
    """
    w = balanced_shares(bandwidth)
    n = len(bandwidth)
    return max(((1 + (n - 2) * w[s]) / b for s, b in bandwidth.items()), default=Fraction(0))


def alike_view(servers: Sequence[ServerInfo]) -> list[ServerInfo]:
    """Several degraded servers that differ, seen alike: each keeps only the NICs alive on
    all of them, at the slowest of their bandwidths, if that costs the water-filling at
    most :data:`ALIKE_SLACK` (:func:`water_filling_time`); otherwise ``servers``.

    The pipelined hierarchical schedule needs its degraded servers alike. Two servers of
    4 × 8 GPUs that lost NIC 0 and NIC 3 (256 MiB): 1.471 × the bound with the direct
    schedule, 1.263 × both seen without NICs 0 and 3 (the water-filling 7 % slower).

    >>> from resilientcc.topology import fail_nics, hierarchical
    >>> from resilientcc.schedules._build import server_view
    >>> t = fail_nics(fail_nics(hierarchical(4, 8), 0, [0]), 1, [3])
    >>> view = alike_view(server_view(t))
    >>> tuple((sv.alive, sv.egress / 10**9) for sv in view[:2])
    (((1, 2, 4, 5, 6, 7), Fraction(300, 1)), ((1, 2, 4, 5, 6, 7), Fraction(300, 1)))
    >>> t = fail_nics(fail_nics(hierarchical(4, 4), 0, [0]), 1, [3])  # 1 of 4: too costly
    >>> view = alike_view(server_view(t))
    >>> tuple(sv.alive for sv in view[:2])
    ((1, 2, 3), (0, 1, 2))
    """
    slow = _degraded(servers)
    if len(slow) < 2 or len({(sv.alive, sv.egress, sv.ingress) for sv in slow}) == 1:
        return list(servers)
    common = tuple(c for c in slow[0].alive if all(c in sv.alive for sv in slow))
    if not common or any(not sv.nic_bw for sv in slow):
        return list(servers)
    tau = min(sv.nic_bw[c] for sv in slow for c in common)
    view = [sv if sv.healthy else restricted(sv, common, tau) for sv in servers]
    before = water_filling_time({sv.index: sv.bandwidth for sv in servers})
    after = water_filling_time({sv.index: sv.bandwidth for sv in view})
    return view if after <= before * (1 + ALIKE_SLACK) else list(servers)


def rail_weights(
    rails: Sequence[int], extra: Mapping[int, Fraction], per_unit: Fraction
) -> dict[int, Fraction]:
    """Weights ``λ_c`` (sum 1) with ``per_unit·λ_c + extra_c`` as equal as possible (≥ 0).

    >>> rail_weights([0, 1], {0: Fraction(0), 1: Fraction(1, 4)}, Fraction(1))
    {0: Fraction(5, 8), 1: Fraction(3, 8)}
    """
    if per_unit <= 0:
        return {c: Fraction(1, len(rails)) for c in rails}
    xs = sorted((extra.get(c, Fraction(0)), c) for c in rails)
    # find level L with Σ max(0, L − x_c) = per_unit
    for k in range(len(xs), 0, -1):
        low = xs[:k]
        level = (per_unit + sum((x for x, _ in low), Fraction(0))) / k
        if level >= low[-1][0]:
            break
    return {c: max(Fraction(0), level - extra.get(c, Fraction(0))) / per_unit for c in rails}


def piece_weights(k: int, cap: int = 4) -> list[Fraction]:
    """Relative piece sizes: small first and last pieces (short pipeline fill and drain).

    Sizes double from the ends up to ``cap``. OptCC's deep pipelines use ``cap=2``
    (half-size end pieces): larger middle pieces lengthen the straggler's wait for its
    results (1 GiB, 4 servers, 12 pieces: 1.20 × the bound against 1.22 × with 4).

    >>> piece_weights(6)
    [Fraction(1, 1), Fraction(2, 1), Fraction(4, 1), Fraction(4, 1), Fraction(2, 1), Fraction(1, 1)]
    >>> piece_weights(4, cap=2)
    [Fraction(1, 1), Fraction(2, 1), Fraction(2, 1), Fraction(1, 1)]
    """
    out = []
    for i in range(k):
        edge = min(i, k - 1 - i)
        out.append(Fraction(min(2**edge, cap)))
    return out


def default_pieces(size: Fraction, servers: int, *, decoupled: bool = False) -> int:
    """Pipeline depth: enough pieces to keep NICs busy, few enough to bound overheads.

    A deeper pipeline shortens the fill (a straggler's results cannot return before its
    piece has arrived): 1 GiB on 4 × 8 GPUs with 4 NICs lost takes 1.20 × the bound
    with 12 pieces against 1.46 × with 6 (coupled schedule). The simulator's cost grows
    linearly with the pieces.

    The decoupled schedule (one straggler that owns nothing) gains from depth at every
    scale (1 GiB, 4 servers, 4 NICs lost: 1.15 / 1.12 / 1.09 / 1.11 × the bound with
    12 / 16 / 20 / 28 pieces; 8 servers: 1.41 / 1.23 / 1.21 × with 6 / 12 / 18;
    256 MiB on 4 servers: 1.30 / 1.24 × with 8 / 12).

    Examples:
        >>> [default_pieces(Fraction(m * 2**20), 4) for m in (1, 32, 128, 256, 1024)]
        [1, 2, 4, 8, 12]
        >>> [default_pieces(Fraction(m * 2**20), 8) for m in (256, 1024)]
        [8, 12]
        >>> cases = ((4, 256), (4, 1024), (8, 1024))
        >>> [default_pieces(Fraction(m * 2**20), n, decoupled=True) for n, m in cases]
        [12, 20, 12]
    """
    mib = float(size) / 2**20
    deep = servers <= DEEP_MAX_SERVERS  # the decoupled schedule's deepest pipelines
    if mib <= 8:
        return 1
    if mib <= 64:
        return 2
    if mib <= 128:
        return 4
    if mib <= 512:
        return 12 if decoupled else 8
    return 20 if decoupled and deep else 12


class DirectPlan:
    """Which rails each pair of servers uses (arcs), from the shares and NIC health.

    ``base_load[c]``: load already on rail ``c`` of every healthy server from other
    traffic (per direction, in units of the direct region), which the rail weights
    even out.
    """

    def __init__(
        self,
        servers: Sequence[ServerInfo],
        shares: Mapping[int, Fraction],
        healthy_rails: Sequence[int] | None = None,
        base_load: Mapping[int, Fraction] | None = None,
    ) -> None:
        self.servers = list(servers)
        self.shares = dict(shares)
        healthy = [sv for sv in servers if sv.healthy]
        nics = healthy[0].nics if healthy else 1
        rails = list(healthy_rails) if healthy_rails is not None else list(range(nics))
        self.healthy_rails = rails
        # extra load per healthy NIC from pairs with degraded servers (units of a piece)
        w_h = shares[healthy[0].index] if healthy else Fraction(0)
        extra: dict[int, Fraction] = {c: Fraction((base_load or {}).get(c, 0)) for c in rails}
        for d in servers:
            if d.healthy:
                continue
            common = [c for c in d.alive if c < nics] or list(d.alive)
            for c in common:
                if c in extra:
                    extra[c] += (shares[d.index] + w_h) / len(common)
        per_unit = 2 * (len(healthy) - 1) * w_h
        self.lam = rail_weights(rails, extra, per_unit)
        # group rails by weight (rotation inside a group keeps the arc boundaries)
        groups: dict[Fraction, list[int]] = {}
        for c in rails:
            if self.lam[c] > 0:
                groups.setdefault(self.lam[c], []).append(c)
        self.groups = sorted(groups.items(), key=lambda kv: kv[1][0])

    def common(self, s: ServerInfo, t: ServerInfo) -> list[int]:
        both = [c for c in s.alive if c in t.alive]
        return both or list(s.alive)

    def arcs(self, s: ServerInfo, t: ServerInfo, pos: int) -> list[tuple[Fraction, int]]:
        """Arcs ``(length, rail)`` (lengths sum to 1) of t's shard that s exchanges on each rail."""
        if s.healthy and t.healthy:
            out = []
            for lam, grp in self.groups:
                for j in range(len(grp)):
                    out.append((lam, grp[(j + pos) % len(grp)]))
            return out
        rails = self.common(s, t)
        m = len(rails)
        return [(Fraction(1, m), rails[(j + pos) % m]) for j in range(m)]


def _others(sv: ServerInfo, first: int, rot: int) -> list[int]:
    """Ranks of server ``sv`` with ``first`` in front, the rest rotated by ``rot``."""
    rest = [r for r in sv.ranks if r != first]
    if rest:
        k = rot % len(rest)
        rest = rest[k:] + rest[:k]
    return [first, *rest]


def _leaf_first(nodes: list[int], leaf: int) -> list[int]:
    """``nodes`` with ``leaf`` moved to position 1 (a binomial-tree leaf that sends first)."""
    rest = [r for r in nodes[1:] if r != leaf]
    return [nodes[0], leaf, *rest]


def _others_last(sv: ServerInfo, first: int, last: int) -> list[int]:
    """Ranks of server ``sv``: ``first`` in front, ``last`` at the end (a late leaf)."""
    mid = [r for r in _others(sv, first, first) if r not in (first, last)]
    return [first, *mid, last]


def direct_allreduce(
    b: Builder,
    servers: Sequence[ServerInfo],
    region: Fraction,
    pieces: int,
    plan: DirectPlan,
    *,
    max_serial: int = 2,
    release0: float = 0.0,
    total_bytes: float = 0.0,
    piece_weights: Sequence[Fraction] | None = None,
    window: int = 0,
    intra_channel: int = 0,
    rs_channel_offset: int = 0,
    ag_channel_offset: int = 0,
    stage_degraded: bool = True,
    degraded_connections: int = 1,
    flat_bcast: bool = False,
    decouple: bool = True,
    balance: bool = True,
    avoid_stage: bool = True,
) -> None:
    """Append the chunks and transfers of a direct, pipelined AllReduce of ``region``.

    ``region`` is the fraction of the buffer it covers (its chunks are appended after
    the builder's existing chunks). See the module docs for the stages.
    """
    owners = [sv for sv in servers if plan.shares.get(sv.index, Fraction(0)) > 0]
    # decoupled: the one non-owner d gets the others' sum P (which does not wait for d's
    # data) and adds its own; each owner t adds d's staged partial to P
    nonown = [sv for sv in servers if plan.shares.get(sv.index, Fraction(0)) == 0]
    dec = nonown[0] if decouple and len(nonown) == 1 and len(nonown[0].ranks) > 1 else None

    def tree_order(nodes: list[int], kind: str, **kw: Any) -> list[int]:
        return b.arrange(nodes, kind, **kw) if balance else nodes

    weights = list(piece_weights) if piece_weights is not None else [Fraction(1)] * pieces
    wsum = sum(weights, Fraction(0))
    xcount = 0
    gates: dict[int, dict[int, list[int]]] = {}
    for k, pw in enumerate(weights):
        release = release0 + k
        piece = region * pw / wsum
        for t in owners:
            senders = [sv for sv in servers if sv.index != t.index]
            t_dec = dec if dec is not None and len(t.ranks) > 2 else None
            seg = piece * plan.shares[t.index]
            arcs = {s.index: plan.arcs(s, t, pos) for pos, s in enumerate(senders)}
            cuts: set[Fraction] = {Fraction(0), Fraction(1)}
            for arc in arcs.values():
                pos_ = Fraction(0)
                for length, _ in arc:
                    pos_ += length
                    cuts.add(pos_)
            if not senders:
                g = len(t.ranks)
                cuts = {Fraction(i, g) for i in range(g + 1)}
            bounds = sorted(cuts)
            for lo, hi in itertools.pairwise(bounds):
                mid = (lo + hi) / 2
                x = b.chunk(seg * (hi - lo))
                nbytes = float(seg * (hi - lo)) * total_bytes
                rail: dict[int, int] = {}
                for s in senders:
                    acc = Fraction(0)
                    for length, c in arcs[s.index]:
                        acc += length
                        if mid < acc:
                            rail[s.index] = c
                            break
                # arrival GPUs on t: the rail's GPU, capped at max_serial, spread otherwise.
                # With ``stage_degraded`` a degraded sender's partial is *staged*: copied
                # into a free GPU of t after that GPU's own data went up t's tree, then
                # forwarded into the owner last, so the straggler's stream never waits for
                # the healthy servers' progress (and they never wait for it until the end).
                staged = (
                    {s.index for s in senders if stage_degraded and t.healthy and not s.healthy}
                    if len(t.ranks) > 2
                    else set()
                )
                c_in = -1
                if t_dec is not None:
                    staged = {t_dec.index}
                    # dec sends on rail c_out into t's GPU q on that rail, and gets P back
                    # on rail c_in from the owner, the GPU on that rail: no NVLink hop on
                    # either network path (NVLink ports are shared by many tree flows)
                    c_out = rail[t_dec.index]
                    common = plan.common(t_dec, t)
                    c_in = common[(common.index(c_out) + 1) % len(common)]
                    q_dec = t.rail_rank(c_out) if c_out < t.nics else t.ranks[0]
                    owner = t.rail_rank(c_in) if c_in < t.nics else t.ranks[0]
                    if owner == q_dec:
                        owner = next(r for r in _others(t, q_dec, q_dec) if r != q_dec)
                load: dict[int, int] = {r: 0 for r in t.ranks}
                if t_dec is not None and avoid_stage:
                    # keep the straggler's landing GPU free of healthy arrivals, so its
                    # copy waits only for that GPU's own leaf send
                    load[q_dec] = max_serial
                arrive: dict[int, int] = {}
                for s in senders:
                    if s.index in staged:
                        continue
                    c = rail[s.index]
                    r = t.rail_rank(c) if c < t.nics else t.ranks[0]
                    if t_dec is not None and avoid_stage and r == q_dec:
                        r = owner
                    elif load[r] >= max_serial:
                        r = min(t.ranks, key=lambda q: (load[q], (q - r) % len(t.ranks)))
                    load[r] += 1
                    arrive[s.index] = r
                if t_dec is None and senders:
                    # owner: the GPU with most arrivals (healthy-rail GPU)
                    owner = max(t.ranks, key=lambda q: (load[q], -((q - xcount) % len(t.ranks))))
                elif t_dec is None:
                    owner = t.ranks[int(mid * len(t.ranks)) % len(t.ranks)]
                # (decoupled: the owner is the GPU on rail c_in, chosen above)
                stage_at: dict[int, int] = {}
                h_dec = -1
                used = {owner} | {r for r, v in load.items() if v}
                if t_dec is not None:
                    stage_at[t_dec.index] = q_dec
                for s in senders:
                    if s.index not in staged or s.index in stage_at:
                        continue
                    c = rail[s.index]
                    pref = t.rail_rank(c) if c < t.nics else t.ranks[0]
                    order = _others(t, owner, owner)
                    # leaves of t's binomial tree (odd positions) send first, unconditionally
                    free = [q for i, q in enumerate(order) if i % 2 == 1 and q not in used]
                    if not free:
                        staged.discard(s.index)
                        load[owner] += 1
                        arrive[s.index] = owner
                        continue
                    q = pref if pref in free else free[0]
                    used.add(q)
                    stage_at[s.index] = q
                # stage 1: intra-server reduce on every sender, into its rail GPU
                for s in senders:
                    c = rail[s.index]
                    root = s.rail_rank(c)
                    done = gates.setdefault(s.index, {})
                    gate = tuple(done.get(k - window, ())) if window else ()
                    nodes = _others(s, root, root)
                    if t_dec is not None and s.index == t_dec.index:
                        h_dec = s.rail_rank(c_in) if c_in < s.nics else nodes[1]
                        if h_dec == root:
                            h_dec = nodes[1]
                        nodes = _leaf_first(nodes, h_dec)
                    last = b.tree_reduce(
                        tree_order(
                            nodes,
                            "reduce",
                            front=2 if t_dec is not None and s.index == t_dec.index else 1,
                        ),
                        x,
                        channel=intra_channel,
                        release=release + 0.0,
                        nbytes=nbytes,
                        gate=gate,
                    )
                    if last is not None:
                        done.setdefault(k, []).append(last)
                # stage 2: network reduce into t, then t's tree into the owner
                before: dict[int, list[tuple[int, int, bool]]] = {}
                # degraded senders first: their arrivals then wait for nobody
                for s in sorted(senders, key=lambda sv: (sv.healthy, sv.index)):
                    if s.index in stage_at:
                        continue
                    c = rail[s.index]
                    before.setdefault(arrive[s.index], []).append(
                        (s.rail_rank(c), c + rs_channel_offset, True)
                    )
                t_nodes = (
                    _leaf_first(_others(t, owner, owner), q_dec)
                    if t_dec is not None
                    else _others(t, owner, owner)
                )
                b.tree_reduce(
                    tree_order(t_nodes, "reduce", front=2 if t_dec is not None else 1),
                    x,
                    channel=intra_channel + 1,
                    release=release + 0.2,
                    nbytes=nbytes,
                    before_send=before,
                )
                for s in senders:
                    if s.index in stage_at:
                        c = rail[s.index]
                        q = stage_at[s.index]
                        b.add(
                            s.rail_rank(c),
                            q,
                            x,
                            COPY,
                            c + rs_channel_offset,
                            net=True,
                            release=release + 0.2,
                            nbytes=nbytes,
                        )
                        if dec is None:
                            b.add(
                                q,
                                owner,
                                x,
                                REDUCE,
                                intra_channel + 4,
                                release=release + 0.25,
                                nbytes=nbytes,
                            )
                root = owner
                if t_dec is not None:
                    # P (everyone but dec) goes back to dec at once, into a GPU of dec
                    # already read by dec's tree; t's result is P + dec's staged partial
                    q = stage_at[t_dec.index]
                    b.add(
                        owner,
                        h_dec,
                        x,
                        COPY,
                        c_in + ag_channel_offset,
                        net=True,
                        release=release + 0.25,
                        nbytes=nbytes,
                    )
                    b.add(
                        owner,
                        q,
                        x,
                        REDUCE,
                        intra_channel + 4,
                        release=release + 0.25,
                        nbytes=nbytes,
                    )
                    root = q
                # stage 3: result -> its server (flat on healthy servers, tree otherwise)
                b.tree_bcast(
                    tree_order(
                        _others_last(t, root, owner) if root != owner else _others(t, owner, owner),
                        "bcast",
                        keep_last=root != owner,
                    ),
                    x,
                    channel=intra_channel + 2,
                    release=release + 0.3,
                    nbytes=nbytes,
                    flat=flat_bcast and t.healthy,
                )
                # stage 4: back to every sender on the same rail, then inside the sender
                for s in senders:
                    if t_dec is not None and s.index == t_dec.index:
                        continue
                    c = rail[s.index]
                    src = t.rail_rank(c) if c < t.nics else owner
                    dst = s.rail_rank(c)
                    par = (xcount % degraded_connections) if not s.healthy else 0
                    b.add(
                        src,
                        dst,
                        x,
                        COPY,
                        c + ag_channel_offset + t.nics * par,
                        net=True,
                        release=release + LAG,
                        nbytes=nbytes,
                    )
                for s in senders:
                    c = rail[s.index]
                    if t_dec is not None and s.index == t_dec.index:
                        d_root = s.rail_rank(c)
                        b.add(
                            d_root,
                            h_dec,
                            x,
                            REDUCE,
                            intra_channel + 4,
                            release=release + LAG,
                            nbytes=nbytes,
                        )
                        b.tree_bcast(
                            tree_order(_others_last(s, h_dec, d_root), "bcast", keep_last=True),
                            x,
                            channel=intra_channel + 3,
                            release=release + LAG + 0.1,
                            nbytes=nbytes,
                            flat=False,
                        )
                        continue
                    b.tree_bcast(
                        tree_order(_others(s, s.rail_rank(c), s.rail_rank(c)), "bcast"),
                        x,
                        channel=intra_channel + 3,
                        release=release + LAG + 0.1,
                        nbytes=nbytes,
                        flat=flat_bcast and s.healthy,
                    )
                xcount += 1


def _degraded(servers: Sequence[ServerInfo]) -> list[ServerInfo]:
    """The degraded servers (dead or slowed NICs), in order."""
    return [sv for sv in servers if not sv.healthy]


def _use_pipeline(servers: Sequence[ServerInfo], asked: object, other: bool) -> bool:
    """Whether ``optcc`` runs the pipelined hierarchical schedule (its ``pipeline`` option)."""
    if asked is not None and not isinstance(asked, bool):
        raise ScheduleError(f"optcc: pipeline must be true or false, got {asked!r}")
    if asked is False:
        return False
    blocker = pipeline_blocker(servers)
    if asked:
        if other:
            raise ScheduleError(
                "optcc: pipeline cannot be combined with ring_fraction, direct or weighted_ring"
            )
        if blocker is not None:
            raise ScheduleError(f"optcc: pipeline needs {blocker}")
        return True
    # where the straggler owns nothing (decoupled regime) the direct schedule was the
    # default below six servers until the credit window (1 GiB, 4 of 8 NICs lost, 3 / 4 / 5
    # servers: pipelined 5.643 / 5.685 / 5.694 ms against 6.334 / 5.887 / 6.112)
    # above eight servers only where several degraded servers rule out the hierarchical
    # and weighted rings and leave the direct schedule (16 x 8 GPUs, 1 NIC lost on each of
    # two servers, 256 MiB: 1.361 x the bound against 2.211; Balance 1.466)
    several = len(_degraded(servers)) > 1
    big = len(servers) > PIPELINE_MAX_SERVERS and not several
    return not (other or blocker is not None or big)


def _use_hier_ring(
    servers: Sequence[ServerInfo], shares: Mapping[int, Fraction], asked: object, other: bool
) -> bool:
    """Whether ``optcc`` runs the hierarchical ring (its ``hier_ring`` option)."""
    if asked is not None and not isinstance(asked, bool):
        raise ScheduleError(f"optcc: hier_ring must be true or false, got {asked!r}")
    # the default: above eight servers, or wherever the straggler owns nothing (1 GiB,
    # half the NICs lost, 4 / 8 servers: 5.497 / 5.569 ms against the pipelined 5.685 /
    # 5.815; with 2 lost on 8 servers, where it owns a share, 5.839 against 5.394, 5.401
    # with the ring's later spacing and depth; 1 lost: 5.403 against 5.189)
    degraded = _degraded(servers)
    owns_nothing = any(shares[sv.index] == 0 for sv in degraded)
    # from seven servers on, a straggler that owns a share gets it as the hierarchical
    # ring's sliver (hier_ring.default_sliver). 1 GiB, 1 / 2 NICs lost: 6 servers 5.022
    # / 5.106 ms against the pipelined 4.987 / 5.092, 7 servers 4.910 against 5.084, 8
    # servers 4.988 / 5.145 against 5.189 / 5.394. Its NICs all at 7/8: 6 servers 5.064
    # against 4.893, 7 servers 4.977 against 5.004, 8 servers 5.012 against 5.154 (256
    # MiB: 1.381 against 1.486), 16 servers 5.350 against the weighted ring's 5.384
    # (without the sliver the hierarchical ring took 5.478 there)
    few = len(servers) < SLIVER_MIN_SERVERS
    if asked is False or (asked is None and few and not owns_nothing):
        return False
    if len(degraded) > 1:
        blocker: str | None = "one degraded server at most"
    else:
        blocker = pipeline_blocker(servers)
    if blocker is None and len(servers) - len(degraded) < 2:
        blocker = "two healthy servers"
    if asked:
        if other:
            raise ScheduleError(
                "optcc: hier_ring cannot be combined with pipeline, ring_fraction, direct"
                " or weighted_ring"
            )
        if blocker is not None:
            raise ScheduleError(f"optcc: hier_ring needs {blocker}")
        return True
    # with no degraded server OptCC stays NCCL's ring above eight servers (16 x 8 GPUs,
    # 1 GiB: the hierarchical ring 5.327 ms, 5.300 with its rings both ways and 96
    # pieces, 1 % for 3.1 million transfers; the ring 5.353)
    return bool(degraded) and not other and blocker is None


def _use_weighted_ring(
    topology: Topology, servers: Sequence[ServerInfo], asked: object, other: bool
) -> tuple[int, Fraction] | None:
    """The straggler and its bandwidth fraction if ``optcc`` runs the weighted ring."""
    if asked is not None and not isinstance(asked, bool):
        raise ScheduleError(f"optcc: weighted_ring must be true or false, got {asked!r}")
    if asked is False or (asked is None and len(servers) <= PIPELINE_MAX_SERVERS):
        return None
    degraded = _degraded(servers)
    full = max(sv.bandwidth for sv in servers)
    ok = len(degraded) == 1 and full > 0
    beta = degraded[0].bandwidth / full if ok else Fraction(0)
    if ok:
        ok = weighted_ring_applies(topology, beta)
    if asked:
        if other:
            raise ScheduleError(
                "optcc: weighted_ring cannot be combined with pipeline, ring_fraction or direct"
            )
        if not ok:
            raise ScheduleError(
                "optcc: weighted_ring needs three servers or more, one of them degraded,"
                " with more than 3/4 of a healthy server's bandwidth"
            )
    if other or not ok:
        return None
    return degraded[0].index, beta


def _share_meta(
    servers: Sequence[ServerInfo], shares: Mapping[int, Fraction]
) -> tuple[tuple[str, str], ...]:
    """Meta entries ``shares`` (every server's) and ``share_straggler`` (the slowest's)."""
    worst = min(servers, key=lambda sv: sv.bandwidth)
    return (
        ("shares", ",".join(f"{s}:{shares[s]}" for s in sorted(shares))),
        ("share_straggler", str(shares[worst.index])),
    )


def _layered(
    topology: Topology,
    servers: Sequence[ServerInfo],
    shares: Mapping[int, Fraction],
    size: Fraction,
    pieces: int | None,
    check: bool,
    net_window: int | None,
    *,
    rings: bool,
    pipeline_timing: float | None = None,
    sliver: Fraction | None = None,
    relay: Fraction | None = None,
) -> Schedule:
    """OptCC's pipelined hierarchical variant, or with ``rings`` its hierarchical ring.

    (:mod:`~resilientcc.schedules.hier_pipeline`, :mod:`~resilientcc.schedules.hier_ring`.)
    """
    # default depth and order: the ring's; without failures the healthy pipeline's;
    # around a degraded server pipeline_depth (with the relay's, if any)
    if rings:
        relay = Fraction(0)  # the hierarchical ring has none
        k, timing = default_ring_pieces(size, len(servers)), 0.0
    elif all(sv.healthy for sv in servers):
        relay = Fraction(0) if relay is None else relay  # asked for: hier_pipeline refuses
        k, timing = default_healthy_pieces(size, len(servers), len(servers[0].ranks)), 0.0
    else:
        relay = pipeline_relay(servers, size) if relay is None else relay
        k, timing = pipeline_depth(size, len(servers), relay)
    if pieces is not None:
        k = pieces
    if pipeline_timing is None:
        pipeline_timing = timing
    if net_window is not None:
        w = net_window
    elif rings or len(servers) <= PIPELINE_MAX_SERVERS:
        w = default_net_window(len(servers), size, k)
    else:  # not tuned there: 16 servers, 1 NIC lost, 32 pieces, W = 9: 8.040 ms, 6.426 without
        w = 0
    b = Builder("optcc", topology.num_ranks)
    if rings:
        thin = default_sliver(servers) if sliver is None else Fraction(sliver)
        classes = hier_ring_schedule(b, servers, k, size, net_window=w, sliver=thin)
        healthy = sum(1 for sv in servers if sv.healthy)
        shares = {sv.index: (1 - thin) / healthy if sv.healthy else thin for sv in servers}
    else:
        classes = hier_pipeline(
            b, servers, shares, k, net_window=w, timing=pipeline_timing, size=size, relay=relay
        )
    meta = (
        ("generator", "optcc"),
        ("pieces", str(k)),
        ("net_window", str(w)),
        *_share_meta(servers, shares),
        ("classes", ",".join(f"{c.rail}/{c.rail_d}:{c.size}" for c in classes)),
        ("ring_fraction", "0"),
        *((("relay", str(relay)),) if relay > 0 else ()),
        ("variant", "hierarchical ring" if rings else "pipelined hierarchical"),
    )
    return b.build(size, topology=topology.shape_fingerprint, meta=meta, check=check)


def _split_blocker(servers: Sequence[ServerInfo]) -> str | None:
    """Why the rings-plus-tail split cannot run on ``servers`` (``None`` if it can)."""
    if sum(1 for sv in servers if sv.healthy) < 2:
        return "at least two healthy servers"
    if not common_rails(servers):
        return "a NIC alive on every server"
    return None


def _ring_fraction(
    servers: Sequence[ServerInfo], shares: Mapping[int, Fraction], asked: object
) -> Fraction:
    """The ring part ``f`` of the split schedule (``optcc``'s ``ring_fraction``)."""
    if asked is not None:
        try:
            f = Fraction(str(asked))
        except (ValueError, ZeroDivisionError):
            raise ScheduleError(f"optcc: ring_fraction must be a number, got {asked!r}") from None
        if not 0 <= f < 1:
            raise ScheduleError(f"optcc: ring_fraction must be in [0, 1), got {f}")
        blocker = _split_blocker(servers) if f > 0 else None
        if blocker is not None:
            raise ScheduleError(f"optcc: ring_fraction needs {blocker}")
        return f
    degraded = _degraded(servers)
    if len(degraded) != 1 or _split_blocker(servers) is not None:
        return Fraction(0)
    d = degraded[0]
    if shares[d.index] == 0:  # decoupled regime: no rings
        return Fraction(0)
    beta = d.bandwidth / max(sv.bandwidth for sv in servers)
    if len(servers) > DEEP_MAX_SERVERS:
        return beta
    # up to six servers: from the direct schedule alone at β = 1/2 to rings alone at β = 1
    return max(Fraction(0), 2 * beta - 1)


def _ring_split(
    b: Builder,
    servers: Sequence[ServerInfo],
    f: Fraction,
    size: Fraction,
    pieces: int | None,
    window: int,
    max_serial: int,
    ramp: bool,
) -> tuple[DirectPlan, int]:
    """Rings on ``f`` of the buffer, the decoupled direct schedule on the rest.

    The caller got ``f`` from :func:`_ring_fraction`, which checked :func:`_split_blocker`.
    """
    nics = max(sv.nics for sv in servers)
    common = common_rails(servers)
    healthy = [sv for sv in servers if sv.healthy]
    p = sum(len(sv.ranks) for sv in servers)
    nic_rings(b, servers, f, common, total_bytes=float(size))
    # the rings load each common rail with 2(p−1)/p · f/|common| per direction
    ring_load = Fraction(2 * (p - 1), p) * f / (len(common) * (1 - f))
    shares = {sv.index: Fraction(1, len(healthy)) if sv.healthy else Fraction(0) for sv in servers}
    plan = DirectPlan(servers, shares, base_load={c: ring_load for c in common})
    k = pieces if pieces is not None else min(12, 2 * default_pieces(size * (1 - f), len(servers)))
    direct_allreduce(
        b,
        servers,
        1 - f,
        k,
        plan,
        max_serial=max_serial,
        total_bytes=float(size),
        window=window,
        piece_weights=piece_weights(k, 4) if ramp else None,
        intra_channel=nics,
        rs_channel_offset=nics,
        ag_channel_offset=2 * nics,
        stage_degraded=False,
        balance=True,
        avoid_stage=False,
    )
    return plan, k


def optcc(
    topology: Topology,
    size: Fraction,
    *,
    check: bool = True,
    pieces: int | None = None,
    max_serial: int = 2,
    window: int | None = None,
    ramp: bool = True,
    ag_offset: int = 0,
    stage: bool = False,
    degraded_connections: int = 1,
    flat_bcast: bool = False,
    decouple: bool = True,
    balance: bool | None = None,
    avoid_stage: bool = False,
    direct: bool = False,
    ring_fraction: Fraction | None = None,
    pipeline: bool | None = None,
    net_window: int | None = None,
    weighted_ring: bool | None = None,
    hier_ring: bool | None = None,
    pipeline_timing: float | None = None,
    sliver: Fraction | None = None,
    relay: Fraction | None = None,
    **options: Any,
) -> Schedule:
    """OptCC: bandwidth-aware direct AllReduce, pipelined in ``pieces``; see the module docs.

    Args:
        topology: the cluster (any failures).
        size: message size in bytes.
        check: run the exact executor before returning (skipped above
            :data:`~resilientcc.schedules._build.CHECK_CAP_TRANSFERS` transfers).
        pieces: pipeline depth (default from the size, :func:`default_pieces`).
        max_serial: most remote partials reduced into one GPU of the owner per chunk.
        window: if positive, a server's intra-server trees of piece ``k`` wait for its
            trees of piece ``k − window`` (a credit window; 0 = off; default 2).
        ramp: smaller first and last pieces (:func:`piece_weights`, ``cap=2`` up to
            :data:`DEEP_MAX_SERVERS` servers, else 4).
        ag_offset: return transfers on channel ``c + ag_offset·K`` (their own connections,
            the same NIC ``c``; 0 = share the scatter's connections).
        stage: stage a degraded sender's partial on a free GPU of the owner and fold it in
            last (decouples the straggler from the healthy servers' progress).
        degraded_connections: spread returns to a degraded server over this many
            connections per NIC (``c + j·K``).
        flat_bcast: healthy servers broadcast results flat (root copies to every GPU)
            instead of along a binomial tree.
        decouple: with exactly one server too slow to own a shard, return it the others'
            sum instead of the result (see the module docs).
        balance: order each intra-server tree so its busiest positions go to the GPUs
            that have moved least so far (default: on in the decoupled regime, where it
            measured 1.24 → 1.16 × the bound, and above :data:`DEEP_MAX_SERVERS`
            servers; off otherwise, where it measured worse: 4 servers, 1 NIC lost,
            5.64 → 5.96 ms).
        avoid_stage: keep healthy arrivals off the GPU where the straggler's partial
            lands (measured slightly worse; off).
        direct: use the direct schedule even when no server is degraded (by default
            OptCC is then NCCL's ring).
        ring_fraction: the fraction ``f`` of the buffer all-reduced by NCCL-style rings
            on the NICs alive everywhere, the rest by the decoupled direct schedule
            with the healthy servers as owners (see the module docs). Default, when
            exactly one server is degraded, it is in the coupled regime, at least two
            servers are healthy and a NIC is alive on every server: the straggler's
            bandwidth fraction ``β`` above :data:`DEEP_MAX_SERVERS` servers and
            ``2β − 1`` up to it; else ``0`` (direct schedule only).
            With ``f > 0`` the tail always uses balanced trees, the decoupled
            straggler and shared connections (``ag_offset`` to ``avoid_stage`` are ignored).
        pipeline: the pipelined hierarchical schedule
            (:mod:`~resilientcc.schedules.hier_pipeline`; ``pieces`` default
            :func:`~resilientcc.schedules.hier_pipeline.pipeline_depth`, or
            :func:`~resilientcc.schedules.hier_pipeline.default_healthy_pieces` with no
            degraded server). Default:
            on when it can run (degraded servers alike, their alive NICs at one
            bandwidth, one NIC per GPU) on up to :data:`PIPELINE_MAX_SERVERS` servers (on
            any number with several degraded servers) and neither ``ring_fraction`` nor
            ``direct`` is given; ``True`` asks for it on any
            number of servers (an error where it cannot run), ``False`` never.
        net_window: the pipelined schedule's credit window: a GPU sends its partials of
            piece ``k`` once the results of piece ``k − net_window`` are back (0 = off;
            default :func:`~resilientcc.schedules.hier_pipeline.default_net_window`,
            ``N + 2`` pieces of 16 MiB, up to :data:`PIPELINE_MAX_SERVERS` servers; off
            above, where it measured worse). The hierarchical ring holds the straggler's
            partials back the same way (default ``N + 2`` pieces of 16 MiB on any number
            of servers). Ignored by the other variants.
        weighted_ring: Balance's rings with the straggler's ring neighbours owning
            larger segments (:mod:`~resilientcc.schedules.weighted_ring`). Default: on
            above :data:`PIPELINE_MAX_SERVERS` servers with exactly one degraded server
            that keeps more than 3/4 of the bandwidth, where the hierarchical ring does
            not run (1 GiB, 16 × 8 GPUs, 1 NIC lost: 5.884 ms against 6.220 for the
            rings plus tail).
        hier_ring: the hierarchical ring (:mod:`~resilientcc.schedules.hier_ring`;
            ``pieces`` and ``net_window`` defaults as for ``pipeline``). Default: on
            where one server is degraded, the pipelined schedule could run
            (:func:`~resilientcc.schedules.hier_pipeline.pipeline_blocker`) and two
            servers are healthy, if it lost whole NICs and there are at least
            :data:`SLIVER_MIN_SERVERS` servers, or if the degraded one owns no shard
            (``β ≤ β*``); ``True`` asks for it wherever it can run, ``False`` never.
        pipeline_timing: the pipelined schedule orders its connections by estimated
            time, pieces ``pipeline_timing`` times a piece's estimated period apart
            (0 = piece by piece; see
            :func:`~resilientcc.schedules.hier_pipeline.hier_pipeline`). Default, and
            default ``pieces``, around a degraded server:
            :func:`~resilientcc.schedules.hier_pipeline.pipeline_depth`.
        sliver: the hierarchical ring's straggler owns this part of every piece (default
            :func:`~resilientcc.schedules.hier_ring.default_sliver`; 0 = none, the
            decoupled straggler). Ignored by the other variants.
        relay: in the pipelined schedule each dead-rail GPU of a degraded server
            reduces this part of every piece and relays it to and from the alive GPUs
            over NVLink, whose stages are then direct on that server (default
            :func:`~resilientcc.schedules.hier_pipeline.pipeline_relay`: ``1/9`` with
            one of 8 NICs lost, from 256 MiB, on up to six servers; else 0, the ring).
            Ignored by the other variants.

    The knobs after ``max_serial`` are for experiments; the defaults are the best measured in the
    simulator (see ``docs/reproducing.md``).

    Examples:
        >>> from resilientcc.topology import hierarchical as cluster, fail_nics
        >>> s = optcc(fail_nics(cluster(4, 8), 0, 4), Fraction(2**30))
        >>> s.meta_get("share_straggler")
        '0'
    """
    size = generator_args("optcc", size, options)
    servers = alike_view(usable_view(server_view(topology)))
    n = len(servers)
    bw = {sv.index: sv.bandwidth for sv in servers}
    shares = balanced_shares(bw)
    if pieces is not None and (not isinstance(pieces, int) or pieces < 1):
        raise ScheduleError(f"optcc: pieces must be a positive integer, got {pieces!r}")
    if net_window is not None and (not isinstance(net_window, int) or net_window < 0):
        raise ScheduleError(f"optcc: net_window must be a non-negative integer, got {net_window!r}")
    if pipeline_timing is not None and (
        not isinstance(pipeline_timing, int | float) or not pipeline_timing >= 0
    ):
        raise ScheduleError(
            f"optcc: pipeline_timing must be a non-negative number, got {pipeline_timing!r}"
        )
    if relay is not None:
        try:
            relay = Fraction(str(relay))
        except (ValueError, ZeroDivisionError):
            raise ScheduleError(f"optcc: relay must be a number, got {relay!r}") from None
    if sliver is not None:
        try:
            sliver = Fraction(str(sliver))
        except (ValueError, ZeroDivisionError):
            raise ScheduleError(f"optcc: sliver must be a number, got {sliver!r}") from None
    others = ring_fraction is not None or direct
    rings = _use_hier_ring(
        servers, shares, hier_ring, others or bool(weighted_ring) or bool(pipeline)
    )
    if not rings and _use_pipeline(
        servers, pipeline, others or bool(weighted_ring) or bool(hier_ring)
    ):
        return _layered(
            topology,
            servers,
            shares,
            size,
            pieces,
            check,
            net_window,
            rings=False,
            pipeline_timing=pipeline_timing,
            relay=relay,
        )
    if rings:
        return _layered(
            topology, servers, shares, size, pieces, check, net_window, rings=True, sliver=sliver
        )
    relief = _use_weighted_ring(topology, servers, weighted_ring, others or bool(pipeline))
    if relief is not None:
        base = weighted_ring_schedule(topology, size, relief[0], relief[1], check=check)
        return replace(
            base,
            name="optcc",
            meta=(("generator", "optcc"), *base.meta, ("variant", "weighted ring")),
        )
    if all(sv.healthy for sv in servers) and not direct:
        # no straggler and no pipelined schedule (above eight servers, or asked): the direct
        # schedule measures 1.12 x the ring (4 x 8 GPUs, 1 GiB), so OptCC is NCCL's ring
        base = ring(topology, size, check=check)
        return replace(
            base,
            name="optcc",
            meta=(("generator", "optcc"), ("variant", "ring (no degraded server)")),
        )
    if not isinstance(max_serial, int) or max_serial < 1:
        raise ScheduleError(f"optcc: max_serial must be a positive integer, got {max_serial!r}")
    if window is None:
        window = 2
    nics = max(sv.nics for sv in servers)
    b = Builder("optcc", topology.num_ranks)
    b.order_by_release = True
    f = _ring_fraction(servers, shares, ring_fraction)
    if f > 0:
        plan, k = _ring_split(b, servers, f, size, pieces, window, max_serial, ramp)
    else:
        # decoupled regime: exactly one server too slow to own a shard (β ≤ β*)
        decoupled = decouple and sum(1 for w in shares.values() if w == 0) == 1
        if balance is None:
            balance = decoupled or n > DEEP_MAX_SERVERS
        k = pieces if pieces is not None else default_pieces(size, n, decoupled=decoupled)
        plan = DirectPlan(servers, shares)
        direct_allreduce(
            b,
            servers,
            Fraction(1),
            k,
            plan,
            max_serial=max_serial,
            total_bytes=float(size),
            window=window,
            piece_weights=piece_weights(k, 2 if n <= DEEP_MAX_SERVERS else 4) if ramp else None,
            ag_channel_offset=nics * ag_offset,
            stage_degraded=stage,
            degraded_connections=degraded_connections,
            flat_bcast=bool(flat_bcast),
            decouple=decouple,
            balance=bool(balance),
            avoid_stage=avoid_stage,
        )
    meta = (
        ("generator", "optcc"),
        ("pieces", str(k)),
        ("max_serial", str(max_serial)),
        *_share_meta(servers, shares),
        ("rail_weights", ",".join(f"{c}:{plan.lam[c]}" for c in sorted(plan.lam))),
        ("ring_fraction", str(f)),
        ("variant", "rings + decoupled direct" if f > 0 else "direct"),
    )
    return b.build(size, topology=topology.shape_fingerprint, meta=meta, check=check)
