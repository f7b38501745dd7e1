"""A lower bound that counts latency: the LP's windows shortened by each link's latency.

The LP of :mod:`resilientcc.bounds.lp` lets every link carry bytes for the whole run,
``f_e <= c_e T``. Under the simulator's model (:mod:`resilientcc.sim.flow`) that is
loose at both ends:

* a transfer *completes* one route latency after its last byte has left (the sum of its
  route's link latencies), and the collective ends ``base_latency`` after the last
  completion;
* a transfer's bytes cross every link of its route while it transmits, and nothing
  transmits before time 0.

So every byte that crosses link ``e`` crosses it in ``[0, T − base − λ_e]``, where
``λ_e`` is the least latency of any route between two different GPUs through ``e``
(:func:`route_latency_floor`), and ``f_e <= c_e (T − base − λ_e)⁺`` holds in every run.
Every other constraint of the LP (cuts, partitions) is unchanged, and ``f`` appears
nowhere else, so the optimum is still the worst single constraint ``A``: the least
``T`` with ``Σ_{e∈A} c_e (T − base − λ_e)⁺ >= rhs_A · M`` (:func:`window_time`, exact).
Cut generation separates at those shortened capacities.

With every latency zero and ``base = 0`` this is the LP bound. It proves only what
latency costs at the ends of the binding links' busy window (one route latency and the
base, about 22 µs on an H100 cluster's network): a pipeline's head, where the first
results need several dependent hops, is not counted.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from resilientcc.bounds.result import BoundConstraint
from resilientcc.errors import BoundError
from resilientcc.topology.model import GPU, Topology
from resilientcc.units import as_fraction, format_time

if TYPE_CHECKING:  # numpy and scipy are imported when a bound is computed
    import numpy as np


__all__ = [
    "DEFAULT_BASE_LATENCY",
    "LatencyBound",
    "latency_lower_bound",
    "route_latency_floor",
    "window_time",
]

#: NCCL's base latency (the simulator's default), exact: 8.4 µs
DEFAULT_BASE_LATENCY = Fraction(84, 10**7)

_TOL = 1e-9


@dataclass(frozen=True)
class LatencyBound:
    """The latency-aware lower bound of :func:`latency_lower_bound`.

    Attributes:
        seconds: the bound (exact): ``base_latency`` plus the end of the binding
            constraint's window.
        size: M (bytes).
        base_latency: the latency added once (seconds, exact).
        binding: the binding constraint, human-readable, with its links' latencies.
        constraint: the binding constraint (links into the graph the bound worked on).
        link_latency: the least and largest ``λ_e`` over the binding constraint's links
            (seconds): the window of link ``e`` ends ``λ_e`` before ``seconds − base``.
        bandwidth_seconds: the same constraint without latency, ``rhs · M / capacity``.
        constraints: the final pool, each with ``seconds`` replaced by its latency-aware
            time (base included).
        iterations: separation rounds.
        contracted: the bound worked on the graph with server islands contracted (a
            relaxation: still valid).
        solve_time_s: wall time.
    """

    seconds: Fraction
    size: Fraction
    base_latency: Fraction
    binding: str
    constraint: BoundConstraint
    link_latency: tuple[Fraction, Fraction]
    bandwidth_seconds: Fraction
    constraints: tuple[BoundConstraint, ...] = ()
    iterations: int = 0
    contracted: bool = False
    solve_time_s: float = 0.0

    @property
    def latency_seconds(self) -> Fraction:
        """What latency adds to the binding constraint: ``seconds − bandwidth_seconds``."""
        return self.seconds - self.bandwidth_seconds


def route_latency_floor(topology: Topology) -> tuple[Fraction, ...]:
    """For each link of ``topology`` (in order), the least latency of a route through it.

    A route runs from one GPU to a different GPU; its latency is the sum of its links'
    latencies. ``λ_e = min over GPUs a ≠ b of d(a, tail e) + latency(e) + d(head e, b)``
    with ``d`` the least latency of a path (any path: routes are such paths). A link on
    no route between two GPUs gets the largest finite value of the others (it carries
    nothing anyway), or 0. (A walk may pass a GPU twice, e.g. GPU → its NIC → back →
    NVLink: a weaker but still valid floor for the PCIe links, which never bind here.)

    Examples:
        >>> from resilientcc.topology import hierarchical
        >>> t = hierarchical(2, 2, 2)
        >>> {lk.kind: round(float(x) * 1e6, 1) for lk, x in zip(t.links, route_latency_floor(t))}
        {'nvlink': 3.4, 'pcie': 5.4, 'network': 14.0}
    """
    names = [nd.name for nd in topology.nodes]
    index = {nm: i for i, nm in enumerate(names)}
    gpus = [index[nd.name] for nd in topology.nodes if nd.kind == GPU and not nd.failed]
    n = len(names)
    fwd: list[list[tuple[int, Fraction]]] = [[] for _ in range(n)]
    bwd: list[list[tuple[int, Fraction]]] = [[] for _ in range(n)]
    for lk in topology.links:
        a, b = index[lk.src], index[lk.dst]
        fwd[a].append((b, lk.latency))
        bwd[b].append((a, lk.latency))
    near_from = _two_nearest(gpus, fwd, n)  # d(GPU a -> v), two distinct a
    near_to = _two_nearest(gpus, bwd, n)  # d(v -> GPU b), two distinct b
    out: list[Fraction | None] = []
    for lk in topology.links:
        a, b = index[lk.src], index[lk.dst]
        best: Fraction | None = None
        for da, ga in near_from[a]:
            for db, gb in near_to[b]:
                if ga != gb:
                    x = da + lk.latency + db
                    if best is None or x < best:
                        best = x
        out.append(best)
    finite = [x for x in out if x is not None]
    fill = max(finite) if finite else Fraction(0)
    return tuple(fill if x is None else x for x in out)


def _two_nearest(
    sources: Sequence[int], adj: Sequence[Sequence[tuple[int, Fraction]]], n: int
) -> list[list[tuple[Fraction, int]]]:
    """For every vertex, its two nearest sources (distinct), as ``(distance, source)``."""
    found: list[list[tuple[Fraction, int]]] = [[] for _ in range(n)]
    heap: list[tuple[Fraction, int, int]] = [(Fraction(0), s, s) for s in sources]
    heapq.heapify(heap)
    while heap:
        d, src, v = heapq.heappop(heap)
        have = found[v]
        if len(have) >= 2 or any(s == src for _, s in have):
            continue
        have.append((d, src))
        for w, lat in adj[v]:
            if len(found[w]) < 2:
                heapq.heappush(heap, (d + lat, src, w))
    return found


def window_time(
    caps: Sequence[Fraction], lats: Sequence[Fraction], need: Fraction
) -> Fraction | None:
    """The least ``t`` with ``Σ c_i (t − λ_i)⁺ >= need`` (exact), ``None`` if no capacity.

    Examples:
        >>> window_time([Fraction(2), Fraction(2)], [Fraction(0), Fraction(1)], Fraction(6))
        Fraction(2, 1)
    """
    pairs = sorted((lam, c) for c, lam in zip(caps, lats, strict=True) if c > 0)
    if not pairs:
        return None
    if need <= 0:
        return pairs[0][0]
    cap = Fraction(0)
    weighted = Fraction(0)  # Σ c_i λ_i over the links open so far
    for k, (lam, c) in enumerate(pairs):
        cap += c
        weighted += c * lam
        t = (need + weighted) / cap
        if k + 1 == len(pairs) or t <= pairs[k + 1][0]:
            return t
    raise AssertionError("unreachable")  # pragma: no cover


def _int_weights(w: np.ndarray, m: int) -> np.ndarray:
    """Non-negative float weights as int32 for max-flow (rounded; the exact time of any
    cut found is recomputed)."""
    import numpy as np

    top = float(w.max()) if len(w) else 0.0
    limit = (2**31 - 1) // max(1, m + 1)
    if top <= 0:
        return np.zeros(len(w), dtype=np.int32)
    return np.rint(w / top * limit).astype(np.int32)


def latency_lower_bound(
    topology: Topology,
    size: object,
    *,
    base_latency: object = DEFAULT_BASE_LATENCY,
    contract: bool | None = None,
    exact_partitions: bool | None = None,
    max_iter: int = 20,
) -> LatencyBound:
    """A lower bound on AllReduce time that counts link latencies and the base latency.

    Valid for every schedule under the simulator's model
    (:func:`resilientcc.sim.simulate` with the same ``base_latency``): see the module
    docs. It is at least the LP bound plus ``base_latency``.

    Args:
        topology: any validated topology with at least two GPUs.
        size: M, bytes.
        base_latency: seconds added once to the collective (the simulator's
            ``base_latency``; default NCCL's 8.4 µs).
        contract: contract server islands (a relaxation); ``None``: as
            :func:`~resilientcc.bounds.lp.lp_bound` does (large graphs only).
        exact_partitions: enumerate every partition (``None``: on small graphs only).
        max_iter: separation rounds before giving up.

    Examples:
        >>> from resilientcc.topology import switch_model
        >>> # 2 endpoints, 100 B/s, 1 s per link: each sends M = 100 B (1 s) over a
        >>> # route of 2 s (no base latency here)
        >>> r = latency_lower_bound(switch_model([100, 100], latency=1), 100, base_latency=0)
        >>> r.seconds, r.bandwidth_seconds
        (Fraction(3, 1), Fraction(1, 1))
    """
    import numpy as np

    from resilientcc.bounds.search import initial_pool, search_graph
    from resilientcc.bounds.separation import best_cut, partition_candidates

    start = time.perf_counter()
    m = as_fraction(size, "size")
    if m <= 0:
        raise BoundError(f"size: must be positive, got {size!r}")
    base = as_fraction(base_latency, "base latency")
    if base < 0:
        raise BoundError(f"base latency: must be at least 0, got {base_latency!r}")
    if topology.num_ranks < 2:
        raise BoundError("latency bound: needs at least two GPUs")
    g, contract, extra = search_graph(topology, contract)
    floor = route_latency_floor(topology)
    lam = [floor[j] for j in g.origin]  # each link's λ_e, from the topology link it stands for
    lam_f = np.array([float(x) for x in lam])
    cap_f = np.array([float(c) for c in g.cap])

    def timed(c: BoundConstraint) -> Fraction:
        t = window_time([g.cap[e] for e in c.links], [lam[e] for e in c.links], c.rhs * m)
        if t is None:  # pragma: no cover - the pools hold constraints with capacity > 0
            raise BoundError(f"latency bound: constraint without capacity: {c.description}")
        return t

    pool = {(c.kind, c.links): (c, timed(c)) for c in initial_pool(g)}
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        t_now = max(t for _, t in pool.values())
        w = cap_f * np.maximum(0.0, float(t_now) - lam_f)
        found: list[BoundConstraint] = []
        if w.max() > 0:
            cut = best_cut(g, _int_weights(w, g.m))
            if cut is not None:
                found.append(cut)
            parts, _ = partition_candidates(
                g, w / w.max(), exact=exact_partitions, extra=extra or []
            )
            found += parts
        added = False
        for c in found:
            key = (c.kind, c.links)
            if key in pool:
                continue
            t = timed(c)
            if float(t) > float(t_now) * (1 + _TOL):
                pool[key] = (c, t)
                added = True
        if not added:
            break
    else:  # pragma: no cover
        raise BoundError(f"latency bound: separation did not converge in {max_iter} rounds")
    best, t_best = max(pool.values(), key=lambda ct: (ct[1], ct[0].kind == "cut"))
    lats = [lam[e] for e in best.links if g.cap[e] > 0]
    lo, hi = min(lats), max(lats)
    span = format_time(lo) if lo == hi else f"{format_time(lo)}-{format_time(hi)}"
    desc = f"{best.description}, within a window shortened by {span} of route latency"
    return LatencyBound(
        seconds=base + t_best,
        size=m,
        base_latency=base,
        binding=desc,
        constraint=best,
        link_latency=(lo, hi),
        bandwidth_seconds=best.rhs * m / best.capacity,
        constraints=tuple(dataclasses.replace(c, seconds=base + t) for c, t in pool.values()),
        iterations=it,
        contracted=bool(contract),
        solve_time_s=time.perf_counter() - start,
    )
