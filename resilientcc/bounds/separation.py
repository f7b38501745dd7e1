"""Separation oracles for the LP of :mod:`resilientcc.bounds.lp`.

Given link weights ``w`` (the LP point), find constraints ``sum(w_e, e in A) >= rhs_A``
that are violated, or the constraint with the smallest ``w(A) / rhs_A``:

* cuts (vertex sets S splitting the GPUs, load leaving S ≥ M): exact, by max-flow
  (``scipy.sparse.csgraph.maximum_flow``): fix one GPU vertex ``g0`` and compute the min
  cut ``g0 -> t`` and ``t -> g0`` for every other GPU vertex ``t``. ``in(S) >= M`` is the
  same family (``in(S) = out(V \\ S)``);
* partitions (k groups, each with ≥ 1 GPU; relays may stay outside every group): exact
  enumeration on small graphs, else heuristics: singletons, servers, and the components
  left when the lightest edges of a Gomory–Hu tree of the symmetrised weights are removed,
  each improved by a local search over the relays' groups.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from fractions import Fraction

import numpy as np
import scipy.sparse as sps
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from resilientcc.bounds.graph import BoundGraph
from resilientcc.bounds.result import BoundConstraint, format_bandwidth

__all__ = [
    "EXACT_PARTITION_LIMIT",
    "best_cut",
    "cut_constraint",
    "gomory_hu",
    "partition_candidates",
    "partition_constraint",
    "partition_labelings",
]

#: exact partition enumeration when (GPU vertices, relay vertices) are at most these
EXACT_PARTITION_LIMIT = (6, 4)


def _matrix(g: BoundGraph, w: np.ndarray) -> sps.csr_matrix:
    mat = sps.coo_matrix((w, (np.array(g.src), np.array(g.dst))), shape=(g.n, g.n)).tocsr()
    mat.sum_duplicates()
    return mat.astype(np.int32)


def _describe_vertices(g: BoundGraph, verts: Sequence[int]) -> str:
    gpu_verts = [v for v in verts if g.is_gpu[v]]
    ngpu = sum(g.gpu_count[v] for v in gpu_verts)
    if g.contracted:
        names = [g.names[v] for v in gpu_verts]
        if len(names) == 1:
            return f"the {ngpu} GPUs of {names[0]}"
        shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
        return f"the {ngpu} GPUs of {len(names)} servers ({shown})"
    servers = {g.server[v] for v in gpu_verts}
    if len(servers) == 1 and None not in servers:
        s = next(iter(servers))
        total = sum(1 for v in range(g.n) if g.is_gpu[v] and g.server[v] == s)
        if total == ngpu and ngpu > 1:
            return f"the {ngpu} GPUs of server {s}"
    names = [g.names[v] for v in gpu_verts]
    if len(names) == 1:
        return f"GPU {names[0]}"
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return f"the {ngpu} GPUs {{{shown}}}"


def cut_constraint(g: BoundGraph, side: set[int]) -> BoundConstraint:
    """The cut constraint of vertex set ``side`` (must split the GPUs): out(S) >= M.

    Described from the side with fewer GPUs: "must send M out" (S) or "must receive M"
    (the complement)."""
    links = tuple(e for e in range(g.m) if g.src[e] in side and g.dst[e] not in side)
    cap = sum((g.cap[e] for e in links), Fraction(0))
    inside = [v for v in side if g.is_gpu[v]]
    outside = [v for v in range(g.n) if g.is_gpu[v] and v not in side]
    n_in = sum(g.gpu_count[v] for v in inside)
    n_out = sum(g.gpu_count[v] for v in outside)
    if n_in > n_out:
        # a symmetric cut reads better from the small side: "the GPUs of X must send M out"
        comp = tuple(e for e in range(g.m) if g.src[e] not in side and g.dst[e] in side)
        if sum((g.cap[e] for e in comp), Fraction(0)) == cap:
            links, inside, outside, n_in, n_out = comp, outside, inside, n_out, n_in
    if n_in <= n_out:
        desc = f"cut: {_describe_vertices(g, inside)} must send M out over {format_bandwidth(cap)}"
    else:
        desc = f"cut: {_describe_vertices(g, outside)} must receive M over {format_bandwidth(cap)}"
    return BoundConstraint("cut", desc, 1, cap, Fraction(1) / cap, 0.0, links)


def best_cut(g: BoundGraph, w: np.ndarray | None = None) -> BoundConstraint | None:
    """The cut S (splitting the GPU vertices) of least weight, exactly by max-flow.

    ``w``: int32 link weights (default: the capacities, :meth:`BoundGraph.int_caps`).
    ``None`` if fewer than two GPU vertices.
    """
    gv = g.gpu_vertices
    if len(gv) < 2:
        return None
    if w is None:
        w, _ = g.int_caps()
    mat = _matrix(g, w)
    g0 = gv[0]
    best: tuple[int, int, int] | None = None
    for t in gv[1:]:
        for s_, t_ in ((g0, t), (t, g0)):
            val = int(maximum_flow(mat, s_, t_, method="dinic").flow_value)
            if best is None or val < best[0]:
                best = (val, s_, t_)
    assert best is not None
    _, s, t = best
    res = maximum_flow(mat, s, t, method="dinic")
    return cut_constraint(g, _source_side(mat, res.flow, s))


def _source_side(mat: sps.csr_matrix, flow: sps.csr_matrix, s: int) -> set[int]:
    """Vertices reachable from ``s`` in the residual graph of a maximum flow."""
    resid = (mat - flow).tocsr()  # flow is skew-symmetric: reverse residuals appear too
    resid.data[resid.data < 0] = 0
    resid.eliminate_zeros()
    reach = breadth_first_order(resid, s, directed=True, return_predecessors=False)
    return {int(v) for v in reach}


# ----------------------------------------------------------------- partitions


def partition_constraint(g: BoundGraph, labels: Sequence[int], direction: str) -> BoundConstraint:
    """The partition constraint of a group labelling (``-1`` = relay in no group).

    ``direction="out"``: load on links leaving a group ≥ 2(k−1)M; ``"in"``: entering.
    """
    k = len({a for a in labels if a >= 0})
    if direction == "out":
        links = tuple(
            e for e in range(g.m) if labels[g.src[e]] >= 0 and labels[g.src[e]] != labels[g.dst[e]]
        )
    else:
        links = tuple(
            e for e in range(g.m) if labels[g.dst[e]] >= 0 and labels[g.src[e]] != labels[g.dst[e]]
        )
    cap = sum((g.cap[e] for e in links), Fraction(0))
    rhs = 2 * (k - 1)
    count: dict[int, int] = {}
    for v, a in enumerate(labels):
        if a >= 0:
            count[a] = count.get(a, 0) + g.gpu_count[v]
    sizes = sorted(count.values(), reverse=True)
    size_txt = (
        f"{k} groups of {sizes[0]} GPU{'s' if sizes[0] > 1 else ''}"
        if sizes[0] == sizes[-1]
        else f"{k} groups of {sizes[-1]}..{sizes[0]} GPUs"
    )
    free = sum(1 for a in labels if a < 0)
    verb = "leave" if direction == "out" else "enter"
    desc = (
        f"partition: {rhs}·M must {verb} {size_txt}"
        + (f" ({free} switches/NICs in no group)" if free else "")
        + f" over {format_bandwidth(cap)}"
    )
    return BoundConstraint(
        f"partition-{direction}",
        desc,
        rhs,
        cap,
        Fraction(rhs) / cap if cap else Fraction(0),
        0.0,
        links,
    )


def _loads(g: BoundGraph, A: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    src, dst = np.array(g.src), np.array(g.dst)
    a_s, a_d = A[:, src], A[:, dst]
    diff = a_s != a_d
    out = ((a_s >= 0) & diff) @ w
    inn = ((a_d >= 0) & diff) @ w
    return out, inn


def _set_partitions(items: list[int]) -> Iterator[list[int]]:
    """All set partitions of ``items`` as label lists (restricted growth strings)."""
    n = len(items)
    if n == 0:
        yield []
        return

    def rec(i: int, labels: list[int], k: int) -> Iterator[list[int]]:
        if i == n:
            yield list(labels)
            return
        for a in range(k + 1):
            labels.append(a)
            yield from rec(i + 1, labels, max(k, a + 1))
            labels.pop()

    yield from rec(0, [], 0)


def _exact_best(g: BoundGraph, w: np.ndarray) -> list[list[int]]:
    """Enumerate every partition; return the best labelling for out and for in."""
    gv, rv = list(g.gpu_vertices), list(g.relay_vertices)
    best = {"out": (-1.0, [0] * g.n), "in": (-1.0, [0] * g.n)}
    for glab in _set_partitions(gv):
        k = max(glab) + 1
        if k < 2:
            continue
        combos = np.array(list(itertools.product(range(-1, k), repeat=len(rv))), dtype=np.int64)
        if combos.size == 0:
            combos = np.zeros((1, 0), dtype=np.int64)
        A = np.empty((combos.shape[0], g.n), dtype=np.int64)
        A[:, gv] = np.array(glab)
        if rv:
            A[:, rv] = combos
        out, inn = _loads(g, A, w)
        for name, load in (("out", out), ("in", inn)):
            with np.errstate(divide="ignore"):
                ratio = np.where(load > 0, 2 * (k - 1) / np.where(load > 0, load, 1), np.inf)
            i = int(np.argmax(ratio))
            if ratio[i] > best[name][0]:
                best[name] = (float(ratio[i]), [int(x) for x in A[i]])
    return [best["out"][1], best["in"][1]]


def gomory_hu(g: BoundGraph, w: np.ndarray) -> list[tuple[int, int, int]]:
    """Gomory–Hu tree (Gusfield's algorithm) of the symmetrised weights ``w(u,v)+w(v,u)``.

    Returns tree edges ``(u, parent, min-cut value)``.
    """
    src, dst = np.array(g.src), np.array(g.dst)
    sym = sps.coo_matrix(
        (np.concatenate([w, w]), (np.concatenate([src, dst]), np.concatenate([dst, src]))),
        shape=(g.n, g.n),
    ).tocsr()
    sym.sum_duplicates()
    sym = sym.astype(np.int32)
    parent = [0] * g.n
    weight = [0] * g.n
    for i in range(1, g.n):
        res = maximum_flow(sym, i, parent[i], method="dinic")
        weight[i] = int(res.flow_value)
        side = _source_side(sym, res.flow, i)
        for j in range(i + 1, g.n):
            if j in side and parent[j] == parent[i]:
                parent[j] = i
    return [(i, parent[i], weight[i]) for i in range(1, g.n)]


def _labels_from_components(g: BoundGraph, comp: list[int]) -> list[int] | None:
    gpu_comps = sorted({comp[v] for v in g.gpu_vertices})
    if len(gpu_comps) < 2:
        return None
    lab = {c: i for i, c in enumerate(gpu_comps)}
    return [lab.get(comp[v], -1) for v in range(g.n)]


def _local_search(g: BoundGraph, labels: list[int], w: np.ndarray, direction: str) -> list[int]:
    """Move relays between groups (or to no group) while the group-boundary load drops.

    A link counts when its ends are in different groups and its tail (``"out"``) or head
    (``"in"``) is in a group. Each relay in turn takes the label (``-1`` = no group, or a
    neighbour's group) that minimises the load on its own links.
    """
    lab = np.array(labels, dtype=np.int64)
    src, dst = np.array(g.src), np.array(g.dst)
    relays = g.relay_vertices
    # per relay: the other end of each incident link, its weight, and whether v is the tail
    inc: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    is_relay = np.zeros(g.n, dtype=bool)
    is_relay[list(relays)] = True
    order = np.argsort(np.concatenate([src, dst]), kind="stable")
    ends = np.concatenate([src, dst])[order]
    others = np.concatenate([dst, src])[order]
    weights = np.concatenate([w, w])[order]
    tails = np.concatenate([np.ones(g.m, dtype=bool), np.zeros(g.m, dtype=bool)])[order]
    bounds = np.searchsorted(ends, np.arange(g.n + 1))
    for v in relays:
        lo, hi = bounds[v], bounds[v + 1]
        if hi > lo:
            inc[v] = (others[lo:hi], weights[lo:hi], tails[lo:hi])
    out_dir = direction == "out"
    for _ in range(10):
        changed = False
        for v, (oth, wt, tail) in inc.items():
            lo_ = lab[oth]
            cur = int(lab[v])
            cands = sorted({-1, cur, *(int(x) for x in lo_ if x >= 0)})
            best_val, best_lab = None, cur
            for c in cands:
                diff = lo_ != c
                # v is the tail: counted if (out: c >= 0) / (in: head label >= 0)
                # v is the head: counted if (out: tail label >= 0) / (in: c >= 0)
                if out_dir:
                    counted = np.where(tail, c >= 0, lo_ >= 0)
                else:
                    counted = np.where(tail, lo_ >= 0, c >= 0)
                val = float(wt[diff & counted].sum())
                if (
                    best_val is None
                    or val < best_val - 1e-12
                    or (val <= best_val + 1e-12 and c == cur)
                ):
                    best_val, best_lab = val, c
            if best_lab != cur:
                lab[v] = best_lab
                changed = True
        if not changed:
            break
    return [int(x) for x in lab]


def partition_candidates(
    g: BoundGraph,
    w: np.ndarray,
    *,
    exact: bool | None = None,
    gh_limit: int = 150,
    extra: Sequence[tuple[list[int], str | None]] = (),
    keep: int = 6,
    islands: bool = True,
) -> tuple[list[BoundConstraint], str]:
    """Partition constraints worth adding, best first, and the search mode used.

    ``w``: float link weights (the LP point). ``exact=None``: exact enumeration when the
    graph is within :data:`EXACT_PARTITION_LIMIT`. ``extra``: more labellings to try
    (e.g. lifted from the contracted graph), each with its direction or ``None`` for both.
    ``keep``: how many of the best labellings are improved by local search;
    ``islands``: try the server islands as groups.
    """
    gv, rv = g.gpu_vertices, g.relay_vertices
    if len(gv) < 2:
        return [], ""
    if exact is None:
        exact = len(gv) <= EXACT_PARTITION_LIMIT[0] and len(rv) <= EXACT_PARTITION_LIMIT[1]
    labelings: list[tuple[list[int], str | None]] = list(extra)
    if exact:
        lo, li = _exact_best(g, w)
        labelings += [(lo, "out"), (li, "in")]
        mode = "exact"
    else:
        mode = "heuristic"
        single = [-1] * g.n
        for i, v in enumerate(gv):
            single[v] = i
        labelings.append((single, None))
        # singletons with each relay placed by local search, always (not only when the
        # plain singletons rank among the best): keeps the bound monotone under failures
        labelings += [(_local_search(g, single, w, d), d) for d in ("out", "in")]
        servers = sorted({sv for v in gv if (sv := g.server[v]) is not None})
        if (
            islands
            and not g.contracted
            and len(servers) >= 2
            and all(g.server[v] is not None for v in gv)
        ):
            # server islands: every vertex of server s in group s
            lab = [servers.index(sv) if sv in servers else -1 for sv in g.server]
            labelings.append((lab, None))
        if g.n <= gh_limit:
            labelings += _gh_labelings(g, w)
    cands = _best_labelings(g, w, labelings, exact, keep=keep)
    out: list[BoundConstraint] = []
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for lab, d in cands:
        c = partition_constraint(g, lab, d)
        key = (c.kind, c.links)
        if key not in seen and c.capacity > 0:
            seen.add(key)
            out.append(c)
    out.sort(key=lambda c: -c.seconds)
    return out[:8], mode


def _best_labelings(
    g: BoundGraph,
    w: np.ndarray,
    labelings: Sequence[tuple[list[int], str | None]],
    exact: bool,
    keep: int,
) -> list[tuple[list[int], str]]:
    scored: list[tuple[float, list[int], str]] = []
    for lab, only in labelings:
        k = len({a for a in lab if a >= 0})
        if k < 3:  # two groups are dominated by the cuts of either group
            continue
        A = np.array([lab], dtype=np.int64)
        lo_, li_ = _loads(g, A, w)
        for d, load in (("out", lo_[0]), ("in", li_[0])):
            if only is not None and d != only:
                continue
            scored.append((2 * (k - 1) / load if load > 0 else np.inf, lab, d))
    scored.sort(key=lambda t: -t[0])
    # the best few as they are, and improved by a local search over the relays
    cands: list[tuple[list[int], str]] = []
    for _, lab, d in scored[:keep]:
        cands.append((lab, d))
        if not exact:
            cands.append((_local_search(g, lab, w, d), d))
    return cands


def partition_labelings(
    g: BoundGraph, w: np.ndarray, *, gh_limit: int = 400
) -> list[tuple[list[int], str]]:
    """The best group labellings the heuristics find on ``g`` (for lifting to a finer graph)."""
    gv = g.gpu_vertices
    if len(gv) < 2:
        return []
    single = [-1] * g.n
    for i, v in enumerate(gv):
        single[v] = i
    labelings: list[tuple[list[int], str | None]] = [(single, None)]
    if g.n <= gh_limit:
        labelings += _gh_labelings(g, w)
    return _best_labelings(g, w, labelings, False, keep=4)


def _gh_labelings(g: BoundGraph, w: np.ndarray) -> list[tuple[list[int], str | None]]:
    out: list[tuple[list[int], str | None]] = []
    # integer weights for scipy's int32 max-flow; no cut can exceed 2^31 - 1
    scale = min(1e6, (2**31 - 1) / (2 * g.m + 1))
    wi = np.maximum(1, np.round(w / max(w.max(), 1e-300) * scale)).astype(np.int64)
    tree = sorted(gomory_hu(g, wi), key=lambda t: t[2])
    for j in range(1, len(tree) + 1):
        parent = list(range(g.n))

        def find(x: int, parent: list[int] = parent) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for u, p, _ in tree[j:]:
            parent[find(u)] = find(p)
        comp = [find(v) for v in range(g.n)]
        lab2 = _labels_from_components(g, comp)
        if lab2 is not None:
            out.append((lab2, None))
    return out
