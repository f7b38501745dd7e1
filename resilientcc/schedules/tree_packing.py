"""Tree packing: an AllReduce for any topology, from pairs of trees packed by a linear program.

The layered generators (ring, Balance, R2CC-AllReduce, OptCC) place their stages by server
and NIC. A topology without that shape (GPUs wired to each other directly, a torus, a
custom fabric with switches of its own) needs a schedule built from the graph alone.
This one follows Blink (Wang et al., MLSys 2020), which packs spanning trees into a
GPU graph for broadcasts and runs AllReduce as a reduce up one tree and a broadcast down
another:

1. **The GPU graph.** Two GPUs are neighbours when the route the simulator takes from one
   to the other (:class:`~resilientcc.sim.routing.Router`) passes no third GPU; the edge
   ``u → v`` loads every link of that route.
2. **Columns.** A column is a root ``r``, an in-tree (every other GPU's path to ``r``)
   and an out-tree (``r``'s paths to every GPU). A part of the buffer given to it is
   summed up the in-tree into ``r`` and copied down the out-tree. At rate ``x`` it puts
   ``x`` on every link of every tree edge's route, once per use.
3. **The packing LP.** Maximise the sum of the columns' rates subject to every link's
   load staying within its capacity, by column generation (in the manner of Garg and
   Könemann's packing framework): the master LP (HiGHS) over the columns so far prices
   every link by its dual; each round builds every root's shortest-path trees under
   those prices and Edmonds' minimum arborescences at the cheapest root (on large graphs
   only in the rounds where no shortest-path tree prices below one), and the columns
   that price below one join, until none does or the round limit is reached. A
   shortest-path tree minimises each GPU's path, not the tree's total: where every GPU
   of a server reaches the network through one NIC, each GPU's own crossing is as short
   as any, and only the arborescence finds the tree that crosses once per server. The
   rates become exact shares of the buffer.
4. **The schedule.** Each column's share is cut into ``pieces`` for pipelining and
   spread over lanes, connections of their own carrying equal rates (the columns' lanes
   in proportion to their shares; :func:`tree_lanes` says why). A piece's reductions run
   leaves first, each parent's in turn, the children whose sums are ready first going
   first (:func:`reduce_order`); its copies root first; pieces follow each other on
   every connection.

``M / throughput`` is the packing's bandwidth time; the simulated time adds latency and
the pipeline's fill and drain. A tree moves every byte over ``2(p − 1)`` GPU edges, as
a ring's reduce-scatter and all-gather do, so where stars or paths through the graph can
load every link evenly (a switch, a ring, a torus) the packing meets the bandwidth bound.

Examples:
    >>> from resilientcc.topology import uniform_switch
    >>> from fractions import Fraction
    >>> s = tree_allreduce(uniform_switch(4, "50GB/s"), Fraction(2**20), pieces=2)
    >>> s.name, s.ranks, len(s.transfers) % 12
    ('trees', 4, 0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from resilientcc._gc import gc_paused
from resilientcc.errors import ScheduleError, SimulationError
from resilientcc.schedules._build import COPY, REDUCE, Builder, generator_args
from resilientcc.schedules.ir import Schedule
from resilientcc.topology.model import GPU, Topology

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "MAX_RANKS",
    "GpuGraph",
    "TreePacking",
    "TreePair",
    "default_tree_lanes",
    "default_tree_pieces",
    "edge_seconds_per_byte",
    "gpu_graph",
    "pack_trees",
    "reduce_order",
    "tree_allreduce",
    "tree_depth",
    "tree_lanes",
]

#: most GPUs the packing handles (each round prices trees at every root)
MAX_RANKS = 64
#: column-generation rounds at most
DEFAULT_MAX_ROUNDS = 200
#: shares are rounded to multiples of 1 / SHARE_DENOMINATOR of the buffer
SHARE_DENOMINATOR = 2**16
#: a column whose rate is below this part of the total is dropped before rounding
MIN_SHARE = 1e-3
#: a column enters the LP when it prices below ``1 − PRICE_TOL``
PRICE_TOL = 1e-9
#: Edmonds' arborescences are priced every round on GPU graphs up to this many edges
#: (every graph of up to 40 GPUs, OptCC's :data:`~resilientcc.schedules.optcc.TREES_MAX_GPUS`),
#: and on larger ones in the rounds where no shortest-path tree prices below one, at most
#: :data:`ARBORESCENCE_MAX_FALLBACKS` times (8 × 8 GPUs: 91 s against 25 s without them,
#: 1.049 × the bound against 1.151). Without them, on 4 × 8 GPUs with one NIC per
#: server, the shortest-path trees stop at 8 × the bound; with them the packing meets it
#: in 19 rounds (3 s).
ARBORESCENCE_MAX_EDGES = 1600
ARBORESCENCE_MAX_FALLBACKS = 16
#: pieces of the buffer no smaller than this (:func:`default_tree_pieces`)
PIECE_MIN_BYTES = 64 * 2**10
#: a lane's piece no smaller than this (:func:`default_tree_lanes`)
LANE_PIECE_MIN_BYTES = 4 * 2**10
#: transfers a schedule stays under (:func:`default_tree_pieces`, :func:`default_tree_lanes`)
MAX_TRANSFERS = 200_000
#: lanes in all at most (:func:`default_tree_lanes`)
MAX_LANES = 256


#: a column: its root, its reduce edges ``(child, parent)`` and its copy edges ``(parent, child)``
Column = tuple[int, tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]
#: a GPU graph's edge index and, per edge, how often its route crosses each link
_Loads = tuple[dict[tuple[int, int], int], list[dict[int, float]]]


@dataclass(frozen=True)
class GpuGraph:
    """The GPUs' neighbour graph of a topology (:func:`gpu_graph`).

    Attributes:
        ranks: number of GPUs.
        edges: ``(u, v)`` ranks of every neighbour pair, in a fixed order.
        routes: per edge, the link indices (into ``topology.links``) of its route.
        channels: per edge, the channel its transfers use (on a server-and-NIC cluster:
            the sender's NIC, so that the route leaves on it).
        stride: channels ``c`` and ``c + stride`` take the same route (the NICs per
            server where the simulator routes by channel; else 1).
        capacity: bytes/s of every topology link.
    """

    ranks: int
    edges: tuple[tuple[int, int], ...]
    routes: tuple[tuple[int, ...], ...]
    channels: tuple[int, ...]
    stride: int
    capacity: tuple[float, ...]


@dataclass(frozen=True)
class TreePair:
    """One column of the packing: a reduce tree into ``root`` and a broadcast tree out of it.

    Attributes:
        root: the rank where the column's part is summed.
        up: ``(child, parent)`` edges of the reduce tree, leaves first (each child after
            all of its own children).
        down: ``(parent, child)`` edges of the broadcast tree, root first.
        share: the part of the buffer it carries (exact; the shares sum to 1).
    """

    root: int
    up: tuple[tuple[int, int], ...]
    down: tuple[tuple[int, int], ...]
    share: Fraction


@dataclass(frozen=True)
class TreePacking:
    """The packing :func:`pack_trees` found.

    Attributes:
        pairs: the columns kept, shares exact.
        throughput: bytes/s of buffer the kept columns move with their exact shares when
            the busiest link is full: ``M / throughput`` is the packing's bandwidth time
            (no latency, no pipeline).
        lp_throughput: what the LP's rates added up to before the shares were rounded
            and columns under :data:`MIN_SHARE` dropped (``throughput`` is at most this).
        rounds: column-generation rounds run.
        graph: the GPU graph it was packed into (:func:`gpu_graph`).
        converged: whether the last round's candidates (shortest-path trees at every
            root, Edmonds' arborescences at one, on graphs above
            :data:`ARBORESCENCE_MAX_EDGES` edges only while
            :data:`ARBORESCENCE_MAX_FALLBACKS` last) all priced at one or more;
            otherwise the round limit stopped it. The candidates are not every tree
            pair, so this is no proof that no better packing exists.
    """

    pairs: tuple[TreePair, ...]
    throughput: float
    lp_throughput: float
    rounds: int
    converged: bool
    graph: GpuGraph

    def time_s(self, size: float) -> float:
        """Bandwidth time of a buffer of ``size`` bytes under the packing (no latency)."""
        return float(size) / self.throughput


# ----------------------------------------------------------------------------- graph
def _channel_base(topology: Topology) -> tuple[list[int], int]:
    """Per rank, the channel that leaves on its own NIC, and the stride between channels
    that share a route (the NICs per server on a cluster the simulator routes by
    channel; 1 where channels only name connections)."""
    p = topology.num_ranks
    if topology.param("builder") != "hierarchical":
        return [0] * p, 1
    from resilientcc.schedules.ring import server_layouts

    base = [0] * p
    stride = 1
    for lay in server_layouts(topology).values():
        stride = max(stride, len(lay.nics))
        for rank, local in zip(lay.ranks, lay.locals, strict=True):
            nic = lay.nic_of_gpu.get(local)
            base[rank] = lay.nics.index(nic) if nic in lay.nics else 0
    return base, stride


def gpu_graph(topology: Topology) -> GpuGraph:
    """Neighbour pairs of GPUs and their routes (see the module docs).

    Raises:
        ScheduleError: a GPU has no neighbour it can send to or receive from, or some
            GPU cannot be reached from another through neighbours.
    """
    from resilientcc.sim.routing import Router  # the simulator's routes, lazily

    p = topology.num_ranks
    if p < 2:
        raise ScheduleError(f"trees: topology {topology.name!r} has {p} GPU; need at least 2")
    if p > MAX_RANKS:
        raise ScheduleError(f"trees: {p} GPUs; the packing handles up to {MAX_RANKS}")
    router = Router(topology)
    gpu_nodes = {n.name for n in topology.nodes if n.kind == GPU}
    links = topology.links
    base, stride = _channel_base(topology)
    edges: list[tuple[int, int]] = []
    routes: list[tuple[int, ...]] = []
    channels: list[int] = []
    for u in range(p):
        for v in range(p):
            if u == v:
                continue
            try:
                route = router.route(u, v, base[u])
            except SimulationError:  # unreachable: not neighbours
                continue
            inner = [links[i].dst for i in route[:-1]]
            if any(name in gpu_nodes for name in inner):
                continue
            edges.append((u, v))
            routes.append(route)
            channels.append(base[u])
    out = [0] * p
    inn = [0] * p
    for u, v in edges:
        out[u] += 1
        inn[v] += 1
    for r in range(p):
        if not out[r] or not inn[r]:
            name = topology.gpus[r].name
            way = "send to" if not out[r] else "receive from"
            raise ScheduleError(f"trees: GPU {name} (rank {r}) has no neighbour to {way}")
    graph = GpuGraph(
        ranks=p,
        edges=tuple(edges),
        routes=tuple(routes),
        channels=tuple(channels),
        stride=stride,
        capacity=tuple(float(lk.capacity) for lk in links),
    )
    _check_strongly_connected(graph, topology)
    return graph


def _check_strongly_connected(graph: GpuGraph, topology: Topology) -> None:
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    u = [a for a, _ in graph.edges]
    v = [b for _, b in graph.edges]
    adj = csr_matrix((np.ones(len(u)), (u, v)), shape=(graph.ranks, graph.ranks))
    n, labels = connected_components(adj, directed=True, connection="strong")
    if n > 1:
        lone = next(r for r in range(graph.ranks) if labels[r] != labels[0])
        raise ScheduleError(
            f"trees: GPU {topology.gpus[lone].name} cannot reach GPU "
            f"{topology.gpus[0].name} through GPU neighbours (or the reverse)"
        )


# ----------------------------------------------------------------------------- trees
def _edge_loads(graph: GpuGraph) -> list[dict[int, float]]:
    """Per GPU edge, how many times each link appears on its route."""
    out = []
    for route in graph.routes:
        d: dict[int, float] = {}
        for li in route:
            d[li] = d.get(li, 0.0) + 1.0
        out.append(d)
    return out


def _shortest_trees(graph: GpuGraph, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Shortest-path trees out of and into every root under edge weights ``weight``.

    Returns ``(pred_out, pred_in)``: row ``r`` of ``pred_out`` is the parent of each GPU
    in ``r``'s out-tree; of ``pred_in``, each GPU's next hop towards ``r`` (both
    ``-9999`` for ``r`` itself).
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra

    p = graph.ranks
    u = np.fromiter((a for a, _ in graph.edges), dtype=np.int64)
    v = np.fromiter((b for _, b in graph.edges), dtype=np.int64)
    # a zero price would drop the edge from the sparse matrix: a tiny floor keeps it
    fwd = csr_matrix((np.maximum(weight, 1e-12), (u, v)), shape=(p, p))
    _, pred_out = dijkstra(fwd, directed=True, return_predecessors=True)
    _, pred_in = dijkstra(fwd.T.tocsr(), directed=True, return_predecessors=True)
    return pred_out, pred_in


def _tree_edges(pred_row: np.ndarray, root: int) -> list[tuple[int, int]]:
    """``(parent, child)`` edges of a predecessor row, by depth (then rank): parents
    before children."""
    children: dict[int, list[int]] = {}
    for x, parent in enumerate(pred_row):
        if x != root:
            children.setdefault(int(parent), []).append(x)
    edges: list[tuple[int, int]] = []
    level = [root]
    while level:  # one depth at a time, each in rank order
        nxt = sorted(c for x in level for c in children.get(x, ()))
        edges += [(int(pred_row[c]), c) for c in nxt]
        level = nxt
    return edges


def _depths(edges: Sequence[tuple[int, int]], root: int) -> dict[int, int]:
    """Depth of every node of a tree given as ``(parent, child)`` edges, parents first."""
    depth = {root: 0}
    for parent, child in edges:
        depth[child] = depth[parent] + 1
    return depth


def _column(
    root: int,
    out_edges: list[tuple[int, int]],
    in_edges: list[tuple[int, int]],
    ranks: int,
) -> Column:
    """A column from its out-tree ``(parent, child)`` edges and its in-tree ``(next hop,
    sender)`` edges (both parents first).

    The reduce edges go deepest first, so every child sends after its own children; the
    reductions into one parent run in turn (they add into one buffer), ordered from the
    rank after the root round, so that the columns' first senders differ (every root's
    star on a switch then starts with a different GPU). The copies go root first.
    """
    depth = _depths(in_edges, root)
    up = tuple(
        (child, parent)
        for parent, child in sorted(in_edges, key=lambda e: (-depth[e[1]], (e[1] - root) % ranks))
    )
    down_depth = _depths(out_edges, root)
    down = tuple(sorted(out_edges, key=lambda e: (down_depth[e[1]], (e[1] - root) % ranks)))
    return root, up, down


def _column_loads(
    col: Column,
    edge_index: Mapping[tuple[int, int], int],
    loads: Sequence[Mapping[int, float]],
) -> dict[int, float]:
    _root, up, down = col
    total: dict[int, float] = {}
    for pair in (*up, *down):
        for li, k in loads[edge_index[pair]].items():
            total[li] = total.get(li, 0.0) + k
    return total


def _candidates(graph: GpuGraph, weight: np.ndarray, roots: Sequence[int]) -> list[Column]:
    pred_out, pred_in = _shortest_trees(graph, weight)
    cols = []
    for r in roots:
        cols.append(
            _column(r, _tree_edges(pred_out[r], r), _tree_edges(pred_in[r], r), graph.ranks)
        )
    return cols


def _arborescence_column(graph: GpuGraph, weight: np.ndarray, root: int) -> Column | None:
    """Edmonds' minimum out- and in-arborescences at ``root`` (networkx)."""
    import networkx as nx

    out_g = nx.DiGraph()
    in_g = nx.DiGraph()
    for (u, v), w in zip(graph.edges, weight, strict=True):
        if v != root:
            out_g.add_edge(u, v, weight=float(w))
        if u != root:
            in_g.add_edge(v, u, weight=float(w))  # reversed: an out-tree of in_g from root
    try:
        a_out = nx.minimum_spanning_arborescence(out_g)
        a_in = nx.minimum_spanning_arborescence(in_g)
    except nx.NetworkXException:
        return None
    out_edges = list(nx.bfs_edges(a_out, root))
    in_edges = list(nx.bfs_edges(a_in, root))  # (next hop, sender)
    if len(out_edges) != graph.ranks - 1 or len(in_edges) != graph.ranks - 1:
        return None
    return _column(root, out_edges, in_edges, graph.ranks)


# ----------------------------------------------------------------------------- packing
def _price(loads: Mapping[int, float], price: np.ndarray, row_of: Mapping[int, int]) -> float:
    """What a column with link ``loads`` costs at unit rate under link prices ``price``."""
    return float(sum(price[row_of[li]] * k for li, k in loads.items()))


def _solve_master(matrix: Sequence[np.ndarray], cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The packing LP over the columns so far: their rates and the links' prices (duals)."""
    from scipy.optimize import linprog

    res = linprog(
        -np.ones(len(matrix)),
        A_ub=np.array(matrix).T,
        b_ub=cap,
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise ScheduleError(f"trees: the packing LP failed ({res.message})")
    return np.asarray(res.x), np.maximum(-np.asarray(res.ineqlin.marginals), 0.0)


def pack_trees(
    topology: Topology,
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    arborescences: bool | None = None,
) -> TreePacking:
    """Pack reduce/broadcast tree pairs into ``topology`` by column generation.

    Args:
        max_rounds: column-generation rounds at most.
        arborescences: also price Edmonds' minimum arborescences at the cheapest root
            every round (``True``), never (``False``), or by default every round where
            the GPU graph has at most :data:`ARBORESCENCE_MAX_EDGES` edges and in the
            rounds where no shortest-path tree prices below one elsewhere.

    Raises:
        ScheduleError: see :func:`gpu_graph`; bad options; or the LP failed.
    """
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise ScheduleError(f"trees: max_rounds must be a positive integer, got {max_rounds!r}")
    graph = gpu_graph(topology)
    p = graph.ranks
    ctx: _Loads = ({e: i for i, e in enumerate(graph.edges)}, _edge_loads(graph))
    used_links = sorted({li for route in graph.routes for li in route})
    row_of = {li: i for i, li in enumerate(used_links)}
    cap = np.array([graph.capacity[li] for li in used_links])
    scale = float(cap.max())
    cap_n = cap / scale  # the LP in units of the fastest link
    # Edmonds every round, or only where the shortest-path trees find nothing
    every_round = (
        len(graph.edges) <= ARBORESCENCE_MAX_EDGES if arborescences is None else arborescences
    )
    as_fallback = arborescences is None and not every_round
    fallbacks = 0

    def edge_weight(price: np.ndarray) -> np.ndarray:
        return np.array([_price(ld, price, row_of) for ld in ctx[1]], dtype=float)

    columns: list[Column] = []
    seen: set[Column] = set()
    matrix: list[np.ndarray] = []

    def add(col: Column, loads: Mapping[int, float]) -> bool:
        if col in seen:
            return False
        seen.add(col)
        columns.append(col)
        vec = np.zeros(len(used_links))
        for li, k in loads.items():
            vec[row_of[li]] = k
        matrix.append(vec)
        return True

    # start: every root's shortest-path trees under 1/capacity (the hop count where
    # links are alike)
    for col in _candidates(graph, edge_weight(1.0 / cap_n), range(p)):
        add(col, _column_loads(col, *ctx))
    rounds = 0
    converged = False
    while True:
        x, price = _solve_master(matrix, cap_n)
        rounds += 1
        if rounds >= max_rounds:
            break
        # pricing: every root's shortest-path trees under the duals, the four cheapest
        # that price below one, and Edmonds' arborescences at the cheapest root
        weight = edge_weight(price)
        cands = _candidates(graph, weight, range(p))
        loads = [_column_loads(c, *ctx) for c in cands]
        costs = [_price(ld, price, row_of) for ld in loads]
        new = [(cands[i], loads[i]) for i in np.argsort(costs)[:4] if costs[i] < 1 - PRICE_TOL]
        fallback = as_fallback and not new and fallbacks < ARBORESCENCE_MAX_FALLBACKS
        if fallback:
            fallbacks += 1
        if every_round or fallback:
            arb = _arborescence_column(graph, weight, cands[int(np.argmin(costs))][0])
            if arb is not None:
                arb_loads = _column_loads(arb, *ctx)
                if _price(arb_loads, price, row_of) < 1 - PRICE_TOL:
                    new.append((arb, arb_loads))
        if not any([add(c, ld) for c, ld in new]):
            converged = True
            break
    rate = x * scale  # bytes/s per column
    lp_total = float(rate.sum())
    keep = [i for i in range(len(columns)) if rate[i] > MIN_SHARE * lp_total]
    shares = _exact_shares([float(rate[i]) for i in keep])
    kept = [(i, sh) for i, sh in zip(keep, shares, strict=True) if sh > 0]
    # the rounded shares' own throughput: the busiest link's time per byte of buffer
    load = sum((float(sh) * matrix[i] for i, sh in kept), np.zeros(len(cap)))
    throughput = 1.0 / float(np.max(load / cap))
    pairs = tuple(
        TreePair(root=columns[i][0], up=columns[i][1], down=columns[i][2], share=sh)
        for i, sh in kept
    )
    return TreePacking(
        pairs=pairs,
        throughput=throughput,
        lp_throughput=lp_total,
        rounds=rounds,
        converged=converged,
        graph=graph,
    )


def _exact_shares(rates: Sequence[float]) -> list[Fraction]:
    """Rates → exact shares, multiples of ``1/SHARE_DENOMINATOR`` summing to 1 (largest
    remainders)."""
    total = sum(rates)
    raw = [r / total * SHARE_DENOMINATOR for r in rates]
    base = [math.floor(v) for v in raw]
    left = SHARE_DENOMINATOR - sum(base)
    for i in sorted(range(len(raw)), key=lambda i: base[i] - raw[i])[:left]:
        base[i] += 1
    return [Fraction(b, SHARE_DENOMINATOR) for b in base]


# ----------------------------------------------------------------------------- schedule
def tree_depth(pair: TreePair) -> int:
    """Hops from the deepest leaf of ``pair``'s reduce tree to its root, plus from its root
    to the deepest leaf of its broadcast tree: the piece-times its first piece takes."""
    up_depth: dict[int, int] = {}
    for child, parent in pair.up:  # children before parents
        up_depth[parent] = max(up_depth.get(parent, 0), up_depth.get(child, 0) + 1)
    down = _depths(pair.down, pair.root)
    return up_depth.get(pair.root, 0) + max(down.values())


def edge_seconds_per_byte(graph: GpuGraph) -> dict[tuple[int, int], float]:
    """Each GPU edge's time per byte alone on its route (its narrowest link), the cost
    :func:`reduce_order` orders a parent's children by."""
    return {
        e: 1.0 / min(graph.capacity[li] for li in route)
        for e, route in zip(graph.edges, graph.routes, strict=True)
    }


def reduce_order(
    up: Sequence[tuple[int, int]], per_byte: Mapping[tuple[int, int], float]
) -> tuple[tuple[int, int], ...]:
    """The reduce edges ``(child, parent)`` of a tree in the order they are issued:
    into each parent, the children whose sums are ready first go first.

    Reductions into one parent's buffer run one at a time (the IR serialises adds into
    one chunk), so a child that must first collect its own subtree, or whose edge
    crosses the network, holds up every sibling queued behind it; the parent's sum is
    then late, and so is the broadcast that waits for it. Each edge is costed at
    ``per_byte`` (its time per byte alone on its route); bottom up, a parent's children
    are taken in the order their sums are ready (earliest release first, which
    minimises when one machine finishes jobs with release times), and the edges are
    returned by the start so estimated, children before parents.

    On 2 × 4 GPUs (every root's column: its server's GPUs, and the other server's
    through the GPU on the root's rail) the network edge then comes last into the
    root, not wherever the rank order put it: 256 MiB, zero latency, 1.123 → 1.073 ×
    the bound (the experiment log, 2026-11-28).

    >>> up = ((5, 4), (6, 4), (7, 4), (4, 1), (0, 1), (2, 1), (3, 1))
    >>> cost = {e: 1.0 for e in up} | {(4, 1): 9.0}
    >>> reduce_order(up, cost)
    ((5, 4), (0, 1), (6, 4), (2, 1), (7, 4), (3, 1), (4, 1))
    """
    children: dict[int, list[int]] = {}
    for child, parent in up:
        children.setdefault(parent, []).append(child)
    ready: dict[int, float] = {}
    start: dict[tuple[int, int], float] = {}
    # children before parents: the reverse of a walk from the roots down
    stack = [p for p in children if p not in {c for c, _ in up}]
    walk: list[int] = []
    while stack:
        x = stack.pop()
        walk.append(x)
        stack.extend(children.get(x, ()))
    for x in reversed(walk):
        t = 0.0
        for c in sorted(children.get(x, ()), key=ready.__getitem__):  # stable: rank order
            t = max(t, ready[c])
            start[c, x] = t
            t += per_byte[c, x]
        ready[x] = t
    return tuple(sorted(up, key=start.__getitem__))


def default_tree_pieces(size: Fraction, depth: int, connections: int, ranks: int) -> int:
    """Pipeline depth: pieces per lane.

    A lane's pieces follow each other down its trees, so its first piece alone takes
    ``depth`` piece-times and the run about ``(pieces + depth − 1)`` of them:
    ``8 · depth`` pieces (8 to 64) keep that fill near 1/8. Fewer where a piece of the
    buffer would fall below 64 KiB, or the schedule would pass
    :data:`MAX_TRANSFERS` transfers (``pieces · connections · 2(p − 1)``).

    >>> default_tree_pieces(Fraction(2**30), 2, 8, 8), default_tree_pieces(Fraction(2**30), 6, 8, 8)
    (16, 48)
    >>> default_tree_pieces(Fraction(2**20), 6, 8, 8)  # 1 MiB: pieces of 64 KiB
    16
    """
    k = max(8, min(64, 8 * depth))
    k = min(k, max(1, int(size // PIECE_MIN_BYTES)))
    k = min(k, max(1, MAX_TRANSFERS // max(1, connections * 2 * (ranks - 1))))
    return k


def tree_lanes(shares: Sequence[Fraction], units: int) -> list[int]:
    """Connections per column: ``units`` lanes of equal rate shared out by the shares
    (at least one per column).

    The simulator, like a network, shares a link max-min fairly among the flows on it,
    not in the LP's proportions. Where every flow is a lane of the same rate, the LP's
    allocation is the max-min fair one on every link it fills, so the columns keep
    their rates: a column with ``n`` times the share runs on ``n`` times the lanes.

    >>> tree_lanes([Fraction(6, 11), Fraction(1, 11), Fraction(4, 11)], 22)
    [12, 2, 8]
    """
    if units < 1:
        raise ScheduleError(f"trees: lanes must be at least 1, got {units}")
    return [max(1, round(s * units)) for s in shares]


def default_tree_lanes(columns: int, pieces: int, ranks: int, size: Fraction) -> int:
    """Lanes in all: as many as :data:`MAX_TRANSFERS` allows at ``pieces`` per lane
    (``lanes · pieces · 2(p − 1)`` transfers) and :data:`LANE_PIECE_MIN_BYTES` per lane
    and piece, from one per column up to :data:`MAX_LANES`.

    >>> default_tree_lanes(14, 56, 8, Fraction(2**28)), default_tree_lanes(55, 64, 16, Fraction(2**28))
    (255, 104)
    >>> default_tree_lanes(6, 16, 6, Fraction(2**20))  # 1 MiB: lanes' pieces of 4 KiB
    16
    """
    most = min(
        MAX_LANES,
        MAX_TRANSFERS // (pieces * 2 * (ranks - 1)),
        int(size // (pieces * LANE_PIECE_MIN_BYTES)),
    )
    return max(columns, most)


@gc_paused
def tree_allreduce(
    topology: Topology,
    size: Fraction,
    *,
    check: bool = True,
    pieces: int | None = None,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    packing: TreePacking | None = None,
    lanes: int | None = None,
    **options: object,
) -> Schedule:
    """The tree-packing AllReduce of ``size`` bytes on any topology (see the module docs).

    Args:
        check: run the exact executor on the result.
        pieces: pipeline depth per lane (default :func:`default_tree_pieces`).
        max_rounds: column-generation rounds at most (:func:`pack_trees`).
        packing: a packing :func:`pack_trees` found for this topology before (else it
            runs).
        lanes: lanes (connections of equal rate) in all, shared out among the columns
            by :func:`tree_lanes` (default :func:`default_tree_lanes`).

    Raises:
        ScheduleError: a size that is not positive, bad or unknown options, or no GPU
            graph to pack (see :func:`gpu_graph`).
    """
    size = generator_args("trees", size, options)
    for name, value in (("max_rounds", max_rounds), ("lanes", lanes)):
        if value is None and name == "lanes":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ScheduleError(f"trees: {name} must be a positive integer, got {value!r}")
    if pieces is not None and (
        isinstance(pieces, bool) or not isinstance(pieces, int) or pieces < 1
    ):
        raise ScheduleError(f"trees: pieces must be a positive integer, got {pieces!r}")
    if topology.num_ranks == 1:  # nothing to send: one chunk, no transfers
        lone = Builder("trees", 1)
        lone.chunk(Fraction(1))
        return lone.build(
            size,
            topology=topology.shape_fingerprint,
            meta=(("variant", "tree packing"), ("columns", "0")),
            check=check,
        )
    if packing is not None and not isinstance(packing, TreePacking):
        raise ScheduleError(f"trees: packing must be a TreePacking, got {packing!r}")
    pk = packing if packing is not None else pack_trees(topology, max_rounds=max_rounds)
    graph = pk.graph
    channel_of = dict(zip(graph.edges, graph.channels, strict=True))
    stride = graph.stride
    ranks = topology.num_ranks
    depth = max(tree_depth(pair) for pair in pk.pairs)
    k = pieces or default_tree_pieces(size, depth, len(pk.pairs), ranks)
    per_column = tree_lanes(
        [pair.share for pair in pk.pairs],
        lanes or default_tree_lanes(len(pk.pairs), k, ranks, size),
    )
    per_byte = edge_seconds_per_byte(graph)
    ups = [reduce_order(pair.up, per_byte) for pair in pk.pairs]
    b = Builder("trees", topology.num_ranks)
    b.order_by_release = True
    for j in range(k):
        q = 0
        for pair, up, n_lanes in zip(pk.pairs, ups, per_column, strict=True):
            for _lane in range(n_lanes):
                # every lane of every column has connections of its own, so that a
                # connection's FIFO holds one lane's pieces in order
                up_ch, down_ch = 2 * q * stride, (2 * q + 1) * stride
                q += 1
                c = b.chunk(pair.share / (k * n_lanes))
                for child, parent in up:
                    b.add(
                        child,
                        parent,
                        c,
                        REDUCE,
                        channel_of[child, parent] + up_ch,
                        release=float(j),
                    )
                for parent, child in pair.down:
                    b.add(
                        parent, child, c, COPY, channel_of[parent, child] + down_ch, release=j + 0.5
                    )
    meta = (
        ("variant", "tree packing"),
        ("columns", str(len(pk.pairs))),
        ("pieces", str(k)),
        ("lanes", str(sum(per_column))),
        ("packing_throughput_Bps", f"{pk.throughput:.6g}"),
        ("packing_rounds", str(pk.rounds)),
        ("packing_converged", str(pk.converged).lower()),
    )
    return b.build(size, topology=topology.shape_fingerprint, meta=meta, check=check)
