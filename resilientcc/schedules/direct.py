"""The direct schedule: a pipelined AllReduce with one network hop each way.

OptCC's first design and the tail of R2CC-AllReduce. :func:`~resilientcc.schedules.optcc.optcc`
runs it where neither its pipelined hierarchical schedule nor its rings can (servers with
unlike GPU or NIC counts, or several degraded servers too unlike to be seen alike), and on
a fraction of the buffer beside rings in its rings-plus-tail variant;
:func:`~resilientcc.schedules.r2cc.r2cc_allreduce` runs its tail with it. The owners'
shares come from :func:`~resilientcc.schedules.optcc.balanced_shares`.

The schedule is a *direct* (one network hop each way) reduce-scatter + all-gather whose shard sizes are
chosen so that every server's network time is equal:

* the buffer is cut into ``pieces`` pipeline pieces; each piece is split among the
  servers, server ``t`` owning a share ``w_t`` (``Σ w_t = 1``);
* per piece and shard, the four stages are

  1. **scatter / intra-server reduce** — on every server ``s ≠ t`` the GPUs reduce
     the shard over NVLink (binomial tree, or a chain with ``chain_reduce``) into the
     GPU whose NIC carries it to ``t``;
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
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from resilientcc.schedules._build import Builder, ServerInfo
from resilientcc.schedules.ir import COPY, REDUCE

__all__ = [
    "CHAIN_STEP",
    "DEEP_MAX_SERVERS",
    "SEVERAL_DEEP_PIECES",
    "SEVERAL_MID_PIECES",
    "DirectPlan",
    "default_pieces",
    "direct_allreduce",
    "piece_weights",
    "rail_weights",
    "rotated_arcs",
]

#: logical delay of a piece's return stage: piece k+1 scatters before piece k returns
LAG = 1.5

#: up to this many servers the decoupled schedule uses its deepest pipeline, the coupled
#: one leaves its trees unbalanced and the ring part is ``2β − 1`` (not ``β``): each
#: measured best in the simulator
DEEP_MAX_SERVERS = 6

#: pieces of the coupled direct schedule with several degraded servers above 512 MiB,
#: up to :data:`DEEP_MAX_SERVERS` servers (:func:`default_pieces`)
SEVERAL_DEEP_PIECES = 18

#: pieces of the coupled direct schedule with several degraded servers above 32 MiB and
#: up to 128 MiB, up to :data:`DEEP_MAX_SERVERS` servers (:func:`default_pieces`)
SEVERAL_MID_PIECES = 6


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


def default_pieces(
    size: Fraction, servers: int, *, decoupled: bool = False, several: bool = False
) -> int:
    """Pipeline depth: enough pieces to keep NICs busy, few enough to bound overheads.

    A deeper pipeline shortens the fill (a straggler's results cannot return before its
    piece has arrived): 1 GiB on 4 × 8 GPUs with 4 NICs lost takes 1.20 × the bound
    with 12 pieces against 1.46 × with 6 (coupled schedule). The simulator's cost grows
    linearly with the pieces.

    The decoupled schedule (one straggler that owns nothing) gains from depth at every
    scale (1 GiB, 4 servers, 4 NICs lost: 1.15 / 1.12 / 1.09 / 1.11 × the bound with
    12 / 16 / 20 / 28 pieces; 8 servers: 1.41 / 1.23 / 1.21 × with 6 / 12 / 18;
    256 MiB on 4 servers: 1.30 / 1.24 × with 8 / 12).

    ``several``: the coupled schedule with several degraded servers (OptCC's direct
    variant where they differ), whose NICs are busy alike (with the rail program's plan,
    :mod:`~resilientcc.schedules.rail_split`, at the water-filling), so little has slack
    for the pipeline's fill and drain: :data:`SEVERAL_DEEP_PIECES` above 512 MiB up to
    :data:`DEEP_MAX_SERVERS` servers (1 GiB, 4-6 servers, 7 patterns: 2-7 % faster
    than with 12; on 7 and 8 servers between 3 % faster and 1 % slower, so 12 there),
    and :data:`SEVERAL_MID_PIECES` above 32 MiB up to 128 MiB (14 patterns on 4 and 5
    servers, against 2 pieces at 48 and 64 MiB and 4 at 96 and 128 MiB: geometric means
    0.896 / 0.855 / 0.936 / 0.930 of the time, 14 of 14 faster from 64 MiB; at 32 MiB 4
    and 6 pieces were up to 12 and 25 % slower than 2 in some patterns).

    Examples:
        >>> [default_pieces(Fraction(m * 2**20), 4) for m in (1, 32, 128, 256, 1024)]
        [1, 2, 4, 8, 12]
        >>> [default_pieces(Fraction(m * 2**20), 8) for m in (256, 1024)]
        [8, 12]
        >>> cases = ((4, 256), (4, 1024), (8, 1024))
        >>> [default_pieces(Fraction(m * 2**20), n, decoupled=True) for n, m in cases]
        [12, 20, 12]
        >>> [default_pieces(Fraction(m * 2**20), n, several=True) for n, m in cases]
        [8, 18, 12]
        >>> [default_pieces(Fraction(m * 2**20), 4, several=True) for m in (32, 64, 128)]
        [2, 6, 6]
    """
    mib = float(size) / 2**20
    deep = servers <= DEEP_MAX_SERVERS  # the decoupled schedule's deepest pipelines
    if mib <= 8:
        return 1
    if several and deep and 32 < mib <= 128:
        return SEVERAL_MID_PIECES
    if mib <= 64:
        return 2
    if mib <= 128:
        return 4
    if mib <= 512:
        return 12 if decoupled else 8
    if deep and (decoupled or several):
        return 20 if decoupled else SEVERAL_DEEP_PIECES
    return 12


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
        pair_weights: Mapping[tuple[int, int], Mapping[int, Fraction]] | None = None,
    ) -> None:
        self.servers = list(servers)
        self.shares = dict(shares)
        # (sender, owner) -> each rail's part of the owner's shard (sums to 1); pairs not
        # named here use the rules below
        self.pair_weights = {k: dict(v) for k, v in (pair_weights or {}).items()}
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
        if len(healthy) > 1 and (healthy[0].index, healthy[1].index) in self.pair_weights:
            given = self.pair_weights[(healthy[0].index, healthy[1].index)]
            self.lam = {c: given.get(c, Fraction(0)) for c in rails}
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
        given = self.pair_weights.get((s.index, t.index))
        if given is not None:
            return rotated_arcs(given, pos)
        if s.healthy and t.healthy:
            out = []
            for lam, grp in self.groups:
                for j in range(len(grp)):
                    out.append((lam, grp[(j + pos) % len(grp)]))
            return out
        rails = self.common(s, t)
        m = len(rails)
        return [(Fraction(1, m), rails[(j + pos) % m]) for j in range(m)]


def rotated_arcs(weights: Mapping[int, Fraction], pos: int) -> list[tuple[Fraction, int]]:
    """Arcs ``(length, rail)`` from each rail's part (parts of zero left out), the rails
    of equal part rotated by ``pos`` among themselves (so the arcs' boundaries stay put
    and each sender's sub-chunks start on a different rail).

    Examples:
        >>> rotated_arcs({0: Fraction(1, 2), 1: Fraction(1, 4), 2: Fraction(1, 4)}, 1)
        [(Fraction(1, 2), 0), (Fraction(1, 4), 2), (Fraction(1, 4), 1)]
    """
    groups: dict[Fraction, list[int]] = {}
    for c, w in weights.items():
        if w > 0:
            groups.setdefault(w, []).append(c)
    out: list[tuple[Fraction, int]] = []
    for w, grp in sorted(groups.items(), key=lambda kv: min(kv[1])):
        grp = sorted(grp)
        out.extend((w, grp[(j + pos) % len(grp)]) for j in range(len(grp)))
    return out


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


#: release step between a chain's hops (``direct_allreduce(chain_reduce=True)``), well
#: below the next stage's offset (0.2) in a piece's release time
CHAIN_STEP = 0.01


def _chain_reduce(
    b: Builder,
    sv: ServerInfo,
    root: int,
    chunk: int,
    channel: int,
    release: float,
    *,
    nbytes: float,
    gate: Sequence[int],
) -> int | None:
    """Reduce ``chunk`` over ``sv``'s GPUs along a chain in index order (wrapping) that
    starts after ``root`` and ends at it; returns the last reduction's id."""
    ranks = list(sv.ranks)
    at = ranks.index(root)
    chain = [ranks[(at + j) % len(ranks)] for j in range(1, len(ranks))] + [root]
    last = None
    for j, (src, dst) in enumerate(itertools.pairwise(chain)):
        last = b.add(
            src,
            dst,
            chunk,
            REDUCE,
            channel,
            release=release + CHAIN_STEP * j,
            nbytes=nbytes,
            deps=gate,
        )
    return last


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
    chain_reduce: bool = False,
) -> None:
    """Append the chunks and transfers of a direct, pipelined AllReduce of ``region``.

    ``region`` is the fraction of the buffer it covers (its chunks are appended after
    the builder's existing chunks). See the module docs for the stages.

    ``chain_reduce``: stage 1 on the senders (all but a decoupled straggler) is a chain
    along the server's GPUs in index order, ending at the chunk's rail GPU, instead of a
    binomial tree; hop ``j`` of every chunk of a piece is released before hop ``j + 1``
    of any, so the chains of chunks with different rail GPUs stream through the same
    connections as a ring reduce-scatter does. A tree's root takes several reductions
    into each chunk, one after another (the IR orders reductions into one buffer), so
    with many small chunks on one rail GPU its latencies add up; a chain gives every GPU
    one reduction per chunk. R2CC-AllReduce's tail uses it
    (:func:`~resilientcc.schedules.r2cc.r2cc_allreduce`).
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
                    if chain_reduce and not (t_dec is not None and s.index == t_dec.index):
                        last = _chain_reduce(
                            b, s, root, x, intra_channel, release, nbytes=nbytes, gate=gate
                        )
                    else:
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
