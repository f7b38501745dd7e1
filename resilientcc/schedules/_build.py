"""Shared machinery for the schedule generators: a builder with automatic race-free deps.

:class:`Builder` collects chunks and transfers written in *program order*: for every
``(rank, chunk)`` the transfers touching it are added in the order they should take
effect. The builder then adds the dependencies that make the schedule race-free
(DESIGN.md §6):

* a transfer reading ``(src, chunk)`` depends on the last transfer that wrote it;
* a transfer writing ``(dst, chunk)`` depends on the last writer of ``(dst, chunk)``
  and on every reader of it since that write.

Each transfer also gets an *estimated start time* (``release`` plus the longest
dependency chain under a rough cost model). The final ids are assigned in order of
that estimate, so the FIFO order of every connection ``(src, dst, channel)`` follows
the order in which the data becomes ready, and ids are a topological order of
``deps`` (so FIFO connections cannot deadlock).

Topology helpers (:func:`server_view`) describe the GPUs, NICs and their health in a
form the generators share.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from resilientcc.errors import InputError, ScheduleError
from resilientcc.schedules import executor
from resilientcc.schedules.ir import COPY, REDUCE, Schedule, Transfer, chunks_from_sizes
from resilientcc.topology.model import Topology
from resilientcc.units import to_size

__all__ = [
    "CHECK_CAP_TRANSFERS",
    "LINE_NIC_BW",
    "LINE_NVL_BW",
    "NET_BW",
    "NET_LAT",
    "NVL_BW",
    "NVL_LAT",
    "Builder",
    "ServerInfo",
    "binomial_order",
    "chunk_runs",
    "common_rails",
    "halving_splits",
    "nic_ring_order",
    "nic_rings",
    "require_servers",
    "restricted",
    "server_view",
    "usable_view",
]

#: generators skip the exact executor check above this many transfers (documented cap;
#: it was 2 million until the executor ran each group of chunks with the same operations
#: once: OptCC on 16 x 8 GPUs, 1 NIC lost, 1 GiB, 5.5 million transfers, checks in 20 s)
CHECK_CAP_TRANSFERS = 8_000_000

# rough cost model used only to order transfers (ids); the simulator is the real clock
NVL_LAT = 3.4e-6
NET_LAT = 14e-6
NVL_BW = 450e9 / 3
NET_BW = 50e9 / 3
# one link's full rate, for the pipelines' release times (hier_ring, hier_pipeline timing)
LINE_NIC_BW = 50e9
LINE_NVL_BW = 450e9


@dataclass(frozen=True)
class ServerInfo:
    """One server as the generators see it.

    Attributes:
        index: server index.
        ranks: ranks of its GPUs, by local index.
        nics: number of NICs (failed ones included).
        alive: indices of alive NICs.
        nic_gpu: for each NIC index, the local index of the GPU attached to it.
        gpu_nic: for each local GPU, the index of its NIC.
        egress: total network egress (bytes/s).
        ingress: total network ingress (bytes/s).
        healthy: every NIC alive and at full (the cluster's maximum) capacity.
        nic_bw: for each NIC index, the smaller of its network egress and ingress
            capacity (0 for a dead NIC); empty where unknown (switch models).
    """

    index: int
    ranks: tuple[int, ...]
    nics: int
    alive: tuple[int, ...]
    nic_gpu: tuple[int, ...]
    gpu_nic: tuple[int, ...]
    egress: Fraction
    ingress: Fraction
    healthy: bool
    nic_bw: tuple[Fraction, ...] = ()

    @property
    def uniform_nics(self) -> bool:
        """Whether its alive NICs all have the same bandwidth."""
        return len({self.nic_bw[c] for c in self.alive} if self.nic_bw else ()) <= 1

    @property
    def bandwidth(self) -> Fraction:
        return min(self.egress, self.ingress)

    def rail_rank(self, nic: int) -> int:
        """Rank of the GPU attached to NIC ``nic``."""
        return self.ranks[self.nic_gpu[nic]]


def require_servers(topo: Topology) -> None:
    """Raise ScheduleError unless every GPU belongs to a server (the generators place
    their stages by server; a switch model gives each endpoint a server of its own)."""
    if topo.num_ranks == 0:
        raise ScheduleError(f"topology {topo.name!r} has no GPUs")
    loose = [g.name for g in topo.gpus if g.server is None]
    if loose:
        raise ScheduleError(
            f"topology {topo.name!r}: GPU {loose[0]} belongs to no server ({len(loose)} of "
            f'{topo.num_ranks} GPUs have no "server"); the schedule generators need one '
            "for every GPU (a GPU on its own is a server of one)"
        )


def server_view(topo: Topology) -> list[ServerInfo]:
    """Describe each server (GPU ranks, NICs, health) of a topology.

    Works for :func:`~resilientcc.topology.hierarchical` clusters, switch models (one
    GPU per server, one pseudo-NIC) and loaded topologies whose GPUs all have a server
    (:func:`require_servers`).
    """
    require_servers(topo)
    out = []
    for s in topo.servers:
        gpus = topo.gpus_of_server[s]
        ranks = tuple(g.rank if g.rank is not None else -1 for g in gpus)
        nics = topo.nics_of_server.get(s, ())
        g_count = len(gpus)
        if nics:
            k = len(nics)
            gpu_nic = tuple(i * k // g_count for i in range(g_count))
            nic_gpu = tuple(min(i for i in range(g_count) if gpu_nic[i] == c) for c in range(k))
            alive = tuple(
                n.local if n.local is not None else i for i, n in enumerate(nics) if not n.failed
            )
        else:
            k = 1
            gpu_nic = (0,) * g_count
            nic_gpu = (0,)
            alive = (0,)
        eg = topo.server_egress(s)
        ing = topo.server_ingress(s)
        if not nics:
            # switch model: the endpoint's own links
            name = gpus[0].name
            eg = sum((topo.links[i].capacity for i in topo.out_links[name]), Fraction(0))
            ing = sum((topo.links[i].capacity for i in topo.in_links[name]), Fraction(0))
        nic_bw = tuple(
            min(
                sum(
                    (topo.links[i].capacity for i in ids if topo.links[i].kind == "network"),
                    Fraction(0),
                )
                for ids in (topo.out_links[n.name], topo.in_links[n.name])
            )
            for n in nics
        )
        out.append(ServerInfo(s, ranks, k, alive, nic_gpu, gpu_nic, eg, ing, False, nic_bw))
    full = max((sv.bandwidth for sv in out), default=Fraction(0))
    return [
        ServerInfo(
            sv.index,
            sv.ranks,
            sv.nics,
            sv.alive,
            sv.nic_gpu,
            sv.gpu_nic,
            sv.egress,
            sv.ingress,
            len(sv.alive) == sv.nics and sv.bandwidth == full,
            sv.nic_bw,
        )
        for sv in out
    ]


def usable_view(servers: Sequence[ServerInfo]) -> list[ServerInfo]:
    """The servers as a schedule should use them: on a server whose alive NICs differ in
    bandwidth, only those at least as fast as a threshold ``τ``, each counted at ``τ``.

    ``τ`` maximises ``τ ·`` (NICs at least that fast): one NIC at half speed among eight
    is left out (7 NICs at full rate beat 8 at half), eight NICs at 0.9 and 1 are all
    used at 0.9. A left-out NIC is treated as dead (its GPU reaches the network through
    the others, PXN), so schedules built for dead or uniformly slow NICs apply; servers
    whose alive NICs are alike, and healthy servers, are returned unchanged.

    >>> from resilientcc.topology import degrade_link, hierarchical
    >>> t = degrade_link(hierarchical(2, 4), "s0.nic1", "rail1", Fraction(1, 2))
    >>> sv = usable_view(server_view(t))[0]
    >>> sv.alive, sv.egress == 3 * sv.nic_bw[0], sv.uniform_nics
    ((0, 2, 3), True, True)
    """
    out = []
    for sv in servers:
        if sv.healthy or sv.uniform_nics:
            out.append(sv)
            continue
        speeds = sorted({sv.nic_bw[c] for c in sv.alive}, reverse=True)
        tau = max(speeds, key=lambda x: x * sum(1 for c in sv.alive if sv.nic_bw[c] >= x))
        out.append(restricted(sv, tuple(c for c in sv.alive if sv.nic_bw[c] >= tau), tau))
    return out


def restricted(sv: ServerInfo, used: tuple[int, ...], bw: Fraction) -> ServerInfo:
    """``sv`` seen with only the NICs ``used`` alive, each at bandwidth ``bw``."""
    total = bw * len(used)
    nic_bw = tuple(bw if c in used else Fraction(0) for c in range(sv.nics))
    return replace(sv, alive=used, egress=total, ingress=total, nic_bw=nic_bw)


def binomial_order(n: int) -> list[tuple[int, int]]:
    """Edges ``(child, parent)`` of a binomial reduction tree on positions ``0..n-1``.

    Listed in step order (leaves first); position 0 is the root. Depth ``ceil(log2 n)``.

    >>> binomial_order(4)
    [(1, 0), (3, 2), (2, 0)]
    """
    edges = []
    step = 1
    while step < n:
        for i in range(step, n, 2 * step):
            edges.append((i, i - step))
        step *= 2
    return edges


class _ChunkTracker:
    """The builder's race tracking, chunk by chunk: per rank, each chunk's last writer
    and the transfers that read it since."""

    def __init__(self, ranks: int) -> None:
        self._last_write: list[dict[int, int]] = [{} for _ in range(ranks)]
        self._readers: list[dict[int, list[int]]] = [{} for _ in range(ranks)]

    def touch(self, src: int, dst: int, chunk: int, count: int, tid: int, deps: set[int]) -> None:
        """Add to ``deps`` what transfer ``tid`` (``src`` → ``dst``) must wait for; record it."""
        written_src, written_dst = self._last_write[src], self._last_write[dst]
        read_src, read_dst = self._readers[src], self._readers[dst]
        for c in range(chunk, chunk + count):
            w = written_src.get(c)
            if w is not None:
                deps.add(w)
            w = written_dst.get(c)
            if w is not None:
                deps.add(w)
            readers = read_dst.pop(c, None)  # what read (dst, c) since its last write
            if readers:
                deps.update(readers)
            readers = read_src.get(c)
            if readers is None:
                read_src[c] = [tid]
            else:
                readers.append(tid)
            written_dst[c] = tid


class _RunTracker:
    """The builder's race tracking by runs of chunks: per rank, intervals of chunk ids.

    The same state as :class:`_ChunkTracker` (each chunk's last writer and its readers
    since), kept as a sorted list of interval starts per rank
    with one ``(writer, readers)`` value per interval (``-1``: none; readers a tuple,
    shared between the halves of a split). A transfer of ``count`` consecutive chunks
    then costs one step per interval it meets, not one per chunk, and a write merges
    its whole span into one interval. Used where transfers carry long runs (OptCC's
    merged NVLink rings on 24 servers or more); for single chunks the dictionaries are
    faster (10–23 % of generation on 4 to 20 servers).
    """

    def __init__(self, ranks: int) -> None:
        self._starts: list[list[int]] = [[0] for _ in range(ranks)]
        self._vals: list[list[tuple[int, tuple[int, ...]]]] = [[(-1, ())] for _ in range(ranks)]

    def _span(self, rank: int, a: int, b: int) -> tuple[int, int]:
        """Indices ``i, j`` of ``rank``'s intervals covering chunks ``[a, b)`` exactly."""
        starts, vals = self._starts[rank], self._vals[rank]
        i = bisect_right(starts, a) - 1
        if starts[i] != a:
            i += 1
            starts.insert(i, a)
            vals.insert(i, vals[i - 1])
        j = bisect_right(starts, b, i) - 1
        if starts[j] != b:
            j += 1
            starts.insert(j, b)
            vals.insert(j, vals[j - 1])
        return i, j

    def touch(self, src: int, dst: int, chunk: int, count: int, tid: int, deps: set[int]) -> None:
        """Add to ``deps`` what transfer ``tid`` (``src`` → ``dst``) must wait for; record it."""
        end = chunk + count
        i, j = self._span(src, chunk, end)
        vals = self._vals[src]
        for x in range(i, j):
            w, readers = vals[x]
            if w >= 0:
                deps.add(w)
            vals[x] = (w, (*readers, tid))
        i, j = self._span(dst, chunk, end)
        starts, vals = self._starts[dst], self._vals[dst]
        for x in range(i, j):
            w, readers = vals[x]
            if w >= 0:
                deps.add(w)
            deps.update(readers)
        # the span is now one interval: written by tid, read by none
        del starts[i + 1 : j]
        del vals[i + 1 : j]
        vals[i] = (tid, ())


class Builder:
    """Accumulates chunks and transfers in program order; see the module docs.

    ``runs``: track races by intervals of chunks (:class:`_RunTracker`), for schedules
    whose transfers carry long runs of consecutive chunks, instead of chunk by chunk
    (:class:`_ChunkTracker`); the schedule is the same.
    """

    def __init__(self, name: str, ranks: int, *, runs: bool = False) -> None:
        self.name = name
        self.ranks = ranks
        self.chunk_sizes: list[Fraction] = []
        self._src: list[int] = []
        self._dst: list[int] = []
        self._chunk: list[int] = []
        self._count: list[int] = []
        self._op: list[str] = []
        self._deps: list[tuple[int, ...]] = []
        self._channel: list[int] = []
        self._est: list[float] = []
        self._rel: list[float] = []
        #: order ids by ``release`` (a logical time) instead of the estimated start
        self.order_by_release = False
        self._end: list[float] = []
        #: estimated bytes each rank sent / received inside its server (for :meth:`arrange`)
        self.intra_up: dict[int, float] = {}
        self.intra_down: dict[int, float] = {}
        # what each transfer must wait for: last writers and readers of its chunks
        self._races = _RunTracker(ranks) if runs else _ChunkTracker(ranks)

    # ----- chunks
    def chunk(self, size: Fraction) -> int:
        """Append a chunk of ``size`` (fraction of the buffer); returns its index."""
        if size <= 0:
            raise ScheduleError(f"{self.name}: chunk of size {size}")
        self.chunk_sizes.append(Fraction(size))
        return len(self.chunk_sizes) - 1

    # ----- transfers
    def add(
        self,
        src: int,
        dst: int,
        chunk: int,
        op: str = REDUCE,
        channel: int = 0,
        *,
        net: bool = False,
        deps: Iterable[int] = (),
        release: float = 0.0,
        nbytes: float = 0.0,
        count: int = 1,
    ) -> int:
        """Add a transfer (program order); returns its provisional id.

        Args:
            net: crosses the network (only for the ordering estimate).
            deps: extra happens-before edges (the race-free ones are added automatically).
            release: earliest estimated start (pipelining order).
            nbytes: bytes moved (only for the ordering estimate).
            count: consecutive chunks carried, from ``chunk`` on (one message).
        """
        if src == dst:
            raise ScheduleError(f"{self.name}: transfer from rank {src} to itself")
        tid = len(self._src)
        dd: set[int] = set(deps)
        self._races.touch(src, dst, chunk, count, tid, dd)
        dd.discard(tid)
        est = release
        for d in dd:
            if self._end[d] > est:
                est = self._end[d]
        dur = (NET_LAT + nbytes / NET_BW) if net else (NVL_LAT + nbytes / NVL_BW)
        if not net:
            self.intra_up[src] = self.intra_up.get(src, 0.0) + nbytes
            self.intra_down[dst] = self.intra_down.get(dst, 0.0) + nbytes
        self._src.append(src)
        self._dst.append(dst)
        self._chunk.append(chunk)
        self._count.append(count)
        self._op.append(op)
        self._deps.append(tuple(dd))  # sorted once renumbered, in build
        self._channel.append(channel)
        self._est.append(est)
        self._rel.append(release)
        self._end.append(est + dur)
        return tid

    def added_runs(self) -> list[tuple[int, int, int, int, float]]:
        """``(src, dst, first chunk, count, release)`` of every transfer added so far."""
        return list(zip(self._src, self._dst, self._chunk, self._count, self._rel, strict=True))

    def end_time(self, tid: int) -> float:
        return self._end[tid]

    @property
    def num_transfers(self) -> int:
        return len(self._src)

    def build(
        self,
        size: Fraction,
        *,
        topology: str | None,
        meta: Sequence[tuple[str, str]] = (),
        check: bool = True,
    ) -> Schedule:
        """Freeze into a :class:`Schedule`, ids sorted by estimated start; optionally check it."""
        # a stable sort: ties keep the order of addition
        key = self._rel if self.order_by_release else self._est
        order = sorted(range(len(self._src)), key=key.__getitem__)
        new_id = [0] * len(order)
        for new, old in enumerate(order):
            new_id[old] = new
        renumber = new_id.__getitem__
        src, dst, chunk, op = self._src, self._dst, self._chunk, self._op
        deps, channel, count = self._deps, self._channel, self._count
        transfers = tuple(
            Transfer(
                new,
                src[i],
                dst[i],
                chunk[i],
                op[i],
                tuple(sorted(map(renumber, deps[i]))),
                channel[i],
                None,
                count[i],
            )
            for new, i in enumerate(order)
        )
        sched = Schedule(
            name=self.name,
            ranks=self.ranks,
            size=Fraction(size),
            chunks=chunks_from_sizes(self.chunk_sizes),
            transfers=transfers,
            topology=topology,
            meta=tuple(meta),
        )
        if check and len(transfers) <= CHECK_CAP_TRANSFERS:
            executor.check(sched)  # checks the structure first
        else:
            sched.check_structure()
        return sched

    def arrange(
        self, nodes: Sequence[int], kind: str, *, front: int = 1, keep_last: bool = False
    ) -> list[int]:
        """Reorder ``nodes`` for a binomial tree so the busiest positions go to idle GPUs.

        The first ``front`` nodes (and the last, with ``keep_last``) keep their positions.
        For a ``"reduce"`` the positions with most children (most receives) go to the
        ranks that have received least so far inside their server; for a ``"bcast"``
        those with most children (most sends) go to the ranks that have sent least.
        """
        n = len(nodes)
        children = [0] * n
        for _c, p in binomial_order(n):
            children[p] += 1
        fixed = set(range(min(front, n)))
        if keep_last and n - 1 not in fixed:
            fixed.add(n - 1)
        free_pos = [i for i in range(n) if i not in fixed]
        free_nodes = [nodes[i] for i in free_pos]
        load = self.intra_down if kind == "reduce" else self.intra_up
        free_pos.sort(key=lambda i: (-children[i], i))
        free_nodes.sort(key=lambda r: load.get(r, 0.0))
        out = list(nodes)
        for i, r in zip(free_pos, free_nodes, strict=True):
            out[i] = r
        return out

    # ----- composite patterns
    def tree_reduce(
        self,
        nodes: Sequence[int],
        chunk: int,
        *,
        channel: int = 0,
        release: float = 0.0,
        nbytes: float = 0.0,
        before_send: Mapping[int, Sequence[tuple[int, int, bool]]] | None = None,
        gate: Sequence[int] = (),
    ) -> int | None:
        """Binomial-tree reduce of ``chunk`` over ranks ``nodes`` into ``nodes[0]``.

        Returns the id of the last reduction into the root (``None`` for one node).
        ``gate``: extra deps of every tree edge (a window that keeps pipelining ordered).

        ``before_send[rank]`` lists ``(src, channel, net)`` reductions into ``rank`` (network
        arrivals); they are ordered before every tree reduction, so they wait for nothing
        on this server, and the tree waits for them.
        """
        # network arrivals first: they depend on nothing local, so senders can stream
        for r, items in (before_send or {}).items():
            for src, ch, net in items:
                self.add(src, r, chunk, REDUCE, ch, net=net, release=release, nbytes=nbytes)
        # binomial order: a node's children send before it does
        last = None
        for c, p in binomial_order(len(nodes)):
            last = self.add(
                nodes[c],
                nodes[p],
                chunk,
                REDUCE,
                channel,
                release=release,
                nbytes=nbytes,
                deps=gate,
            )
        return last

    def tree_bcast(
        self,
        nodes: Sequence[int],
        chunk: int,
        *,
        channel: int = 0,
        release: float = 0.0,
        nbytes: float = 0.0,
        flat: bool = True,
        gate: Sequence[int] = (),
    ) -> None:
        """Broadcast ``chunk`` from ``nodes[0]`` to the others (copies).

        ``flat``: the root copies to everyone (depth 1); else a binomial tree (depth log2).
        ``gate``: extra deps of every copy.
        """
        edges = (
            [(0, i) for i in range(1, len(nodes))]
            if flat
            else [(p, c) for c, p in reversed(binomial_order(len(nodes)))]
        )
        for p, c in edges:
            self.add(
                nodes[p], nodes[c], chunk, COPY, channel, release=release, nbytes=nbytes, deps=gate
            )

    def ring_reduce_scatter(
        self,
        ring: Sequence[int],
        groups: Sequence[Sequence[int]],
        channel: int,
        *,
        net: bool = False,
        release: float = 0.0,
        step_release: float = 0.0,
        merge: int = 1,
    ) -> None:
        """Ring reduce-scatter: afterwards ``ring[q]`` holds the full sum of ``groups[q]``.

        Step ``i`` of the ring is released at ``release + i·step_release``. ``merge``:
        up to this many consecutive chunks of a group move as one transfer
        (:func:`chunk_runs`; 1: a transfer per chunk, in the group's order).
        """
        self._ring_pass(ring, groups, channel, REDUCE, net, release, step_release, merge)

    def ring_all_gather(
        self,
        ring: Sequence[int],
        groups: Sequence[Sequence[int]],
        channel: int,
        *,
        net: bool = False,
        release: float = 0.0,
        step_release: float = 0.0,
        merge: int = 1,
    ) -> range:
        """Ring all-gather: ``ring[q]`` starts with ``groups[q]``; afterwards everyone has all.

        ``merge`` as in :meth:`ring_reduce_scatter`. Returns the ids of its transfers.
        """
        return self._ring_pass(ring, groups, channel, COPY, net, release, step_release, merge)

    def flat_all_gather(
        self,
        ring: Sequence[int],
        groups: Sequence[Sequence[int]],
        channel: int,
        *,
        release: float = 0.0,
        after: Sequence[int] = (),
    ) -> None:
        """All-gather in one hop: ``ring[q]`` copies each chunk of ``groups[q]`` straight to
        every other rank (the bytes of :meth:`ring_all_gather`, over ``n − 1`` connections
        per rank instead of one).

        ``after``: ids of earlier transfers; each holder's copies wait for those of them
        it sends (so they do not take its ports from an earlier pass) and are released
        no earlier than they are (ids follow releases with :attr:`order_by_release`, and a
        transfer queued on a connection ahead of its own dependency would deadlock).
        """
        gate: dict[int, list[int]] = {}
        for tid in after:
            gate.setdefault(self._src[tid], []).append(tid)
        for x, group in enumerate(groups):
            mine = gate.get(ring[x], [])
            at = max([release, *(self._rel[t] for t in mine)])
            for c in group:
                self.tree_bcast([*ring[x:], *ring[:x]], c, channel=channel, release=at, gate=mine)

    def _ring_pass(
        self,
        ring: Sequence[int],
        groups: Sequence[Sequence[int]],
        channel: int,
        op: str,
        net: bool,
        release: float,
        step_release: float,
        merge: int = 1,
    ) -> range:
        """``n − 1`` ring steps; at step ``i`` rank ``ring[j]`` forwards one group.

        A reduce-scatter forwards group ``j − i − 1`` (it ends on its own position), an
        all-gather group ``j − i`` (it starts there). Returns the ids of its transfers.
        """
        n = len(ring)
        shift = 1 if op == REDUCE else 0
        runs = [chunk_runs(g, merge) if merge > 1 else [(c, 1) for c in g] for g in groups]
        first = len(self._src)
        for step in range(n - 1):
            for j in range(n):
                for c, k in runs[(j - step - shift) % n]:
                    self.add(
                        ring[j],
                        ring[(j + 1) % n],
                        c,
                        op,
                        channel,
                        net=net,
                        release=release + step * step_release,
                        count=k,
                    )
        return range(first, len(self._src))

    def ring_pass_two_way(
        self,
        ring: Sequence[int],
        groups: Sequence[Sequence[int]],
        channel: int,
        op: str,
        *,
        net: bool = False,
        release: float = 0.0,
        step_release: float = 0.0,
    ) -> int:
        """A reduce-scatter (``op`` reduce) or all-gather (copy) over ``ring`` in both directions.

        Group ``q`` is owned by ``ring[q]``. Reduce-scatter: the ``(n − 1) // 2`` ranks
        before ``q`` pass it forward to ``q`` and the others pass it backward, each chain
        adding its rank's part (both chains end together, the shorter one starting later);
        all-gather: ``q`` sends it both ways, as far. Every rank sends and receives what a
        one-way ring moves, in about half the hops. Returns the number of steps.
        """
        n = len(ring)
        fwd = (n - 1) // 2
        back = n - 1 - fwd
        for step in range(back):
            for q in range(n):
                if op == REDUCE:
                    hops = []
                    if step >= back - fwd:  # forward chain q − fwd … q − 1 → q
                        j = step - (back - fwd)
                        hops.append((q - fwd + j, q - fwd + j + 1))
                    hops.append((q + back - step, q + back - step - 1))  # backward chain
                else:
                    hops = [(q - step, q - step - 1)]
                    if step < fwd:
                        hops.append((q + step, q + step + 1))
                for x, y in hops:
                    for c in groups[q]:
                        self.add(
                            ring[x % n],
                            ring[y % n],
                            c,
                            op,
                            channel,
                            net=net,
                            release=release + step * step_release,
                        )
        return back

    def halving_pass(
        self,
        ring: Sequence[int],
        groups: Sequence[Sequence[int]],
        channel: int,
        op: str,
        *,
        net: bool = False,
        release: float = 0.0,
        level_release: Sequence[float] | float = 0.0,
    ) -> range:
        """Recursive halving reduce-scatter (``op`` reduce) or doubling all-gather (copy).

        Group ``q`` is owned by ``ring[q]``, as in :meth:`ring_reduce_scatter`, for any
        number of ranks (:func:`halving_splits`). At a split of positions into ``A`` and
        ``B`` (``|A| = |B|`` or ``|B| + 1``) ``A[j]`` and ``B[j]`` swap their partials
        of the other half's groups, each run of consecutive chunks as one message. With
        an odd split the extra rank ``a = A[−1]`` sends its partial of each ``B[j]``'s
        group straight to ``B[j]`` and gets nothing (``B[j]`` sends its partial of
        ``a``'s group to ``A[j]`` with the rest), so no rank takes more than two writes
        of one group in a step; ``A[j]`` then receives one group more than ``B[j]``.
        A rank moves about the size of the other half at every level, ``n − 1`` groups
        each way in all (up to one more per odd split), a ring's bytes, in ``⌈log2 n⌉``
        steps instead of ``n − 1``, with ``O(n log n)`` transfers instead of ``n²``. The
        all-gather runs the same exchanges in reverse, deepest level first.

        (Swapping single groups between ``a`` and every ``B[j]`` instead balances the
        bytes exactly, but ``a``'s own group then takes ``|B|`` writes in one step,
        each ordered after the last: 64 × 8 GPUs, half the NICs of one server lost, 1
        GiB, 8 pieces: 8.05 ms against 7.00 ms.)

        ``level_release``: the release of each step after ``release`` (cumulative offsets,
        one per level, or a constant step). Returns the ids of its transfers.
        """
        n = len(ring)
        levels = halving_splits(n)
        if isinstance(level_release, (int, float)):
            offsets = [i * float(level_release) for i in range(len(levels))]
        else:
            offsets = list(level_release)
        steps = range(len(levels)) if op == REDUCE else range(len(levels) - 1, -1, -1)
        first = len(self._src)

        def send(x: int, y: int, chunks: Sequence[int], at: float) -> None:
            for c, k in chunk_runs(chunks):
                self.add(ring[x], ring[y], c, op, channel, net=net, release=at, count=k)

        for step, lv in enumerate(steps):
            at = release + offsets[step]
            for a_side, b_side in levels[lv]:
                k = len(b_side)
                extra = a_side[-1] if len(a_side) > k else None
                a_chunks = [c for q in a_side for c in groups[q]]
                b_chunks = [c for q in b_side for c in groups[q]]
                for j in range(k):
                    x, y = a_side[j], b_side[j]
                    if op == REDUCE:
                        send(x, y, b_chunks, at)
                        send(y, x, a_chunks, at)
                    else:
                        send(x, y, a_chunks, at)
                        send(y, x, b_chunks, at)
                    if extra is not None:
                        if op == REDUCE:
                            send(extra, y, groups[y], at)
                        else:
                            send(y, extra, groups[y], at)
        return range(first, len(self._src))

    def ring_allreduce(
        self,
        ring: Sequence[int],
        chunks: Sequence[int],
        channel_of: dict[tuple[int, int], int] | None = None,
        *,
        net_of: dict[tuple[int, int], bool] | None = None,
        release: float = 0.0,
        nbytes: float = 0.0,
    ) -> None:
        """Ring AllReduce (reduce-scatter then all-gather) of ``chunks`` over ``ring``.

        ``len(chunks)`` must equal ``len(ring)``. ``channel_of[(a, b)]`` names the channel
        of hop ``a -> b``, ``net_of[(a, b)]`` whether it crosses the network.
        """
        n = len(ring)
        if n == 1:
            return
        if len(chunks) != n:
            raise ScheduleError(f"{self.name}: ring of {n} ranks needs {n} chunks")
        ch = channel_of or {}
        nt = net_of or {}
        for step in range(2 * (n - 1)):
            op = REDUCE if step < n - 1 else COPY
            for j in range(n):
                a, b = ring[j], ring[(j + 1) % n]
                c = chunks[(j - step) % n]
                self.add(
                    a,
                    b,
                    c,
                    op,
                    ch.get((a, b), 0),
                    net=nt.get((a, b), False),
                    release=release,
                    nbytes=nbytes,
                )


def halving_splits(n: int) -> list[list[tuple[range, range]]]:
    """The splits of :meth:`Builder.halving_pass` over ``n`` positions, level by level.

    Each range of positions is cut into ``A`` (the first ``⌈len/2⌉``) and ``B``; ranges
    of one position are done. There are ``⌈log2 n⌉`` levels.

    >>> [[(list(a), list(b)) for a, b in lv] for lv in halving_splits(5)]
    [[([0, 1, 2], [3, 4])], [([0, 1], [2]), ([3], [4])], [([0], [1])]]
    >>> len(halving_splits(127)), len(halving_splits(128))
    (7, 7)
    """
    levels: list[list[tuple[range, range]]] = []
    todo = [range(n)]
    while True:
        splits = [(r[: (len(r) + 1) // 2], r[(len(r) + 1) // 2 :]) for r in todo if len(r) >= 2]
        if not splits:
            return levels
        levels.append(splits)
        todo = [half for pair in splits for half in pair]


def chunk_runs(chunks: Iterable[int], longest: int | None = None) -> list[tuple[int, int]]:
    """The chunks as runs ``(first, count)`` of consecutive indices, in index order.

    Runs are maximal, or cut evenly into runs of at most ``longest`` chunks.

    >>> tuple(chunk_runs((7, 3, 4, 5, 9, 8)))
    ((3, 3), (7, 3))
    >>> tuple(chunk_runs(range(7), longest=3))
    ((0, 2), (2, 2), (4, 3))
    """
    out: list[tuple[int, int]] = []
    for c in sorted(set(chunks)):
        if out and out[-1][0] + out[-1][1] == c:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((c, 1))
    if longest is None:
        return out
    cut: list[tuple[int, int]] = []
    for first, count in out:
        parts = -(-count // longest)
        for i in range(parts):
            lo, hi = count * i // parts, count * (i + 1) // parts
            cut.append((first + lo, hi - lo))
    return cut


def common_rails(servers: Sequence[ServerInfo]) -> list[int]:
    """NICs alive on every server (the rails that rings over every GPU can use)."""
    nics = max(sv.nics for sv in servers)
    return [c for c in range(nics) if all(c in sv.alive for sv in servers)]


def nic_ring_order(servers: Sequence[ServerInfo], nic: int) -> list[int]:
    """All ranks, server by server, each server entered at the GPU of NIC ``nic``."""
    out: list[int] = []
    for sv in servers:
        g = sv.nic_gpu[nic] if nic < sv.nics else 0
        out += list(sv.ranks[g:]) + list(sv.ranks[:g])
    return out


def nic_rings(
    b: Builder,
    servers: Sequence[ServerInfo],
    region: Fraction,
    nics: Sequence[int],
    *,
    total_bytes: float = 0.0,
) -> None:
    """Flat ring AllReduces of ``region`` (a fraction of the buffer), one per NIC in ``nics``.

    Ring ``c`` runs over every GPU, entering each server at the GPU of NIC ``c``, so all
    its inter-server hops use rail ``c`` (NCCL's ring restricted to those NICs). Its
    ``p`` chunks of ``region / (len(nics)·p)`` are appended to the builder's chunks.
    """
    p = sum(len(sv.ranks) for sv in servers)
    server_of = {r: sv.index for sv in servers for r in sv.ranks}
    size = region / (len(nics) * p)
    for c in nics:
        ring = nic_ring_order(servers, c)
        chunks = [b.chunk(size) for _ in range(p)]
        hops = [(ring[j], ring[(j + 1) % p]) for j in range(p)]
        b.ring_allreduce(
            ring,
            chunks,
            {h: c for h in hops},
            net_of={h: server_of[h[0]] != server_of[h[1]] for h in hops},
            nbytes=float(size) * total_bytes,
        )


def generator_args(name: str, size: int | Fraction, options: Mapping[str, object]) -> Fraction:
    """Validate a generator call: no unknown ``options`` and a positive ``size``; returns it exact."""
    if options:
        raise ScheduleError(f"{name}: unknown options {sorted(options)}")
    try:
        return to_size(size, f"{name}: size")
    except InputError as e:
        raise ScheduleError(str(e)) from None
