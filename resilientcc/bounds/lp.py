"""The LP lower bound of DESIGN.md §4 on any topology, by cut generation.

Variables: ``f_e >= 0``, the bytes each directed link carries, and ``T``; ``f_e <= c_e T``.
Constraints (proofs in the docs, page "Lower bounds"):

* **cut**: for every vertex set S that splits the GPUs, the load leaving S is ≥ M (the
  load entering S is ≥ M too: that is the cut of the complement);
* **partition**: for every assignment of the vertices to k groups, each group holding
  ≥ 1 GPU, relays (NICs, switches) optionally in no group, the load on links *leaving* a
  group is ≥ 2(k−1)M, and so is the load on links *entering* a group.

Minimise T (cvxpy, HiGHS). Cut generation: start from the single-GPU cuts and the
singleton partition, solve, separate at the LP optimum, add what is violated, repeat.
We separate at the optimal point ``f = c·T`` (every constraint is a covering constraint
and ``f`` only appears in ``f <= c T``, so raising every ``f_e`` to ``c_e T`` keeps the
point optimal); then the cut oracle is an exact min-cut on the capacities and the
partition oracle compares ``2(k−1)/c(A)`` with ``T``.

The problem is scaled (M = 1, capacities in units of the largest) for HiGHS, and the bound
is reported exactly: the LP optimum equals ``rhs·M / c(A)`` for the binding constraint A,
recomputed in :class:`~fractions.Fraction` arithmetic and checked against the solver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np

from resilientcc.bounds.graph import BoundGraph, from_topology
from resilientcc.bounds.result import BoundConstraint, BoundResult
from resilientcc.bounds.search import CONTRACT_ABOVE, initial_pool, lifted_labelings, search_graph
from resilientcc.bounds.separation import best_cut, partition_candidates
from resilientcc.errors import BoundError
from resilientcc.topology.model import Topology
from resilientcc.units import as_fraction

__all__ = [
    "CERTIFY_UP_TO",
    "CONTRACT_ABOVE",
    "clear_cache",
    "island_cut_floor",
    "lp_bound",
    "solve_lp",
]

#: a contracted LP is checked on the original graph when it has at most this many vertices
CERTIFY_UP_TO = 4000

_TOL = 1e-9


@contextlib.contextmanager
def _solver_banner_hidden() -> Iterator[None]:
    """Send what the solver writes to file descriptor 1 to the null device meanwhile.

    HiGHS (1.16) prints its banner straight to descriptor 1 on every solve, whatever its
    options, which would corrupt ``rcc bound --json`` / ``rcc sim --json`` on a terminal
    or in a pipe. Python's own pending output is flushed first and lands where it should.
    """
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError):  # no descriptor 1 to redirect
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def solve_lp(g: BoundGraph, pool: list[BoundConstraint]) -> tuple[float, list[float]]:
    """Solve the LP restricted to ``pool``; return ``(T in units of M/c_max, duals)``."""
    import cvxpy as cp

    used = sorted({e for c in pool for e in c.links})
    pos = {e: i for i, e in enumerate(used)}
    capf = g.cap_float()[used]
    f = cp.Variable(len(used), nonneg=True)
    t = cp.Variable(nonneg=True)
    cover = [cp.sum(f[[pos[e] for e in c.links]]) >= c.rhs for c in pool]
    prob = cp.Problem(cp.Minimize(t), [f <= capf * t, *cover])
    try:
        with _solver_banner_hidden():
            prob.solve(solver="HIGHS")
    except cp.error.SolverError as e:  # pragma: no cover - solver failure
        raise BoundError(f"LP solver failed: {e}") from None
    if prob.status not in ("optimal", "optimal_inaccurate") or t.value is None:
        raise BoundError(f"LP solver returned status {prob.status!r}")
    duals = [
        float(np.asarray(c.dual_value).item()) if c.dual_value is not None else 0.0 for c in cover
    ]
    return float(t.value), duals


def _run(
    g: BoundGraph,
    *,
    max_iter: int,
    exact_partitions: bool | None,
    extra: list[tuple[list[int], str | None]] | None = None,
) -> tuple[float, list[BoundConstraint], list[float], int, str]:
    """Cut generation on ``g``; returns (T scaled, pool, duals, iterations, partition mode)."""
    cmax = g.cap_max()
    pool = initial_pool(g)
    keys = {(c.kind, c.links) for c in pool}
    int_w, _ = g.int_caps()
    capf = g.cap_float()
    mode = ""
    t_val, duals = 0.0, list[float]()
    # the separation at f = c·T does not depend on T: compute the candidates once
    found: list[BoundConstraint] = []
    cut = best_cut(g, int_w)
    if cut is not None:
        found.append(cut)
    parts, mode = partition_candidates(g, capf, exact=exact_partitions, extra=extra or [])
    found += parts
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007
        t_val, duals = solve_lp(g, pool)
        added = False
        for c in found:
            key = (c.kind, c.links)
            # violated at f = c·T:  c(A)·T < rhs  (in scaled units)
            if key not in keys and float(c.capacity / cmax) * t_val < c.rhs * (1 - _TOL):
                pool.append(c)
                keys.add(key)
                added = True
        if not added:
            break
    else:  # pragma: no cover
        raise BoundError(f"cut generation did not converge in {max_iter} rounds")
    return t_val, pool, duals, it, mode


def island_cut_floor(topo: Topology) -> Fraction | None:
    """A lower bound on ``out(S)`` for every cut S that splits the GPUs of some island,
    valid when every island is *closable*; ``None`` when it is not.

    Closable (checked here): the non-GPU vertices of each island (NVSwitch, NICs) have no
    links among themselves, and each such vertex ``u`` has
    ``c(u -> outside the island) <= c(island GPUs -> u)`` and
    ``c(outside -> u) <= c(u -> island GPUs)`` (e.g. PCIe ≥ NIC bandwidth). Then any cut
    that keeps every island's GPUs together can be made island-respecting without raising
    its capacity (docs, "Lower bounds", Proposition 6), and a cut that separates GPUs a, b
    of one island has capacity ≥ the max-flow a -> b ≥ Σ over island relays w of
    ``min(c(a->w), c(w->b))`` (+ a direct link), the floor returned.
    """
    island = {nd.name: nd.server for nd in topo.nodes if nd.server is not None and not nd.failed}
    gpu_names = {g.name for g in topo.gpus}
    cap: dict[tuple[str, str], Fraction] = {}
    for lk in topo.links:
        cap[(lk.src, lk.dst)] = cap.get((lk.src, lk.dst), Fraction(0)) + lk.capacity
    relays_of: dict[int, list[str]] = {}
    for name, s in island.items():
        if name not in gpu_names:
            relays_of.setdefault(s, []).append(name)
    ext_out: dict[str, Fraction] = {}
    ext_in: dict[str, Fraction] = {}
    gpu_in: dict[str, Fraction] = {}
    gpu_out: dict[str, Fraction] = {}
    for (a, b), c in cap.items():
        sa, sb = island.get(a), island.get(b)
        if a not in gpu_names and sa is not None:  # a is an island relay
            if sb == sa and b not in gpu_names:
                return None  # relay-relay link inside an island
            if sb == sa:
                gpu_out[a] = gpu_out.get(a, Fraction(0)) + c
            else:
                ext_out[a] = ext_out.get(a, Fraction(0)) + c
        if b not in gpu_names and sb is not None:
            if sa == sb and a in gpu_names:
                gpu_in[b] = gpu_in.get(b, Fraction(0)) + c
            elif sa != sb:
                ext_in[b] = ext_in.get(b, Fraction(0)) + c
    for rel in relays_of.values():
        for u in rel:
            zero = Fraction(0)
            if ext_out.get(u, zero) > gpu_in.get(u, zero) or ext_in.get(u, zero) > gpu_out.get(
                u, zero
            ):
                return None
    floor: Fraction | None = None
    z = Fraction(0)
    done: dict[tuple[object, ...], Fraction | None] = {}
    for s, gpus in topo.gpus_of_server.items():
        rel = sorted(relays_of.get(s, []), key=lambda x: x.split(".", 1)[-1])
        # islands with the same capacities (most of them) are computed once
        key = tuple(
            (
                tuple(cap.get((a.name, w), z) for w in rel),
                tuple(cap.get((w, a.name), z) for w in rel),
                tuple(cap.get((a.name, b.name), z) for b in gpus),
            )
            for a in gpus
        )
        if key not in done:
            best: Fraction | None = None
            for i, (a_out, _, a_direct) in enumerate(key):
                for j, (_, b_in, _) in enumerate(key):
                    if i != j:
                        val = a_direct[j] + sum(
                            (min(x, y) for x, y in zip(a_out, b_in, strict=True)), z
                        )
                        best = val if best is None else min(best, val)
            done[key] = best
        got = done[key]
        if got is not None:
            floor = got if floor is None else min(floor, got)
    return floor


def _certify(
    topo: Topology, t_seconds: Fraction, size: Fraction
) -> tuple[bool, list[BoundConstraint], str]:
    """Check the lifted solution f = c·T on the original graph. Cuts: by the island
    argument (:func:`island_cut_floor`) when it applies, else every cut by max-flow.
    Partitions: the heuristics (singletons and local search) on the original graph.
    Returns (no violation found, violated constraints, how the cuts were checked)."""
    g = from_topology(topo)
    bad: list[BoundConstraint] = []
    need = size / t_seconds  # every cut needs capacity >= M / T
    floor = island_cut_floor(topo)
    if floor is not None and floor >= need:
        how = "island-splitting cuts dominated (closable islands, intra-island floor)"
    else:
        how = "every cut checked by max-flow"
        cut = best_cut(g)
        if cut is not None and cut.capacity * t_seconds < cut.rhs * size:
            bad.append(cut)
    parts, _ = partition_candidates(
        g, g.cap_float(), exact=False, gh_limit=0, keep=2, islands=False
    )
    bad += [p for p in parts if p.capacity * t_seconds < p.rhs * size]
    return not bad, bad, how


def lp_bound(
    topology: Topology,
    size: object,
    *,
    contract: bool | None = None,
    certify: bool | None = None,
    exact_partitions: bool | None = None,
    max_iter: int = 20,
    reference_bandwidth: Fraction | None = None,
    cache: bool = True,
) -> BoundResult:
    """The LP lower bound on AllReduce time for ``size`` bytes on ``topology``.

    The bound is linear in M, so the LP is solved once per topology and options (for
    M = 1 byte) and cached in-process (:func:`clear_cache`); other sizes are scaled
    exactly. ``solve_time_s`` is the time of the original solve.

    Args:
        topology: any validated topology.
        size: message size M in bytes.
        contract: contract server islands (a relaxation: still a valid bound). ``None``:
            only when the graph has more than :data:`CONTRACT_ABOVE` vertices.
        certify: for a contracted run, check the lifted solution on the original graph
            (``None``: when it has at most :data:`CERTIFY_UP_TO` vertices). When the check
            finds a violated constraint, the LP is rerun on the original graph.
        exact_partitions: enumerate every partition (``None``: on small graphs only).
        max_iter: cut-generation rounds before giving up.
        reference_bandwidth: B for :attr:`BoundResult.normalized` (default: see
            :func:`resilientcc.bounds.reference_bandwidth`).
        cache: reuse a cached solve for the same topology and options.

    Examples:
        >>> from resilientcc.topology import uniform_switch
        >>> r = lp_bound(uniform_switch(4, 100), 300)
        >>> r.seconds, r.binding.split(":")[0]
        (Fraction(9, 2), 'partition')
    """
    from resilientcc.bounds.api import reference_bandwidth as _ref

    m = as_fraction(size, "size")
    if m <= 0:
        raise BoundError(f"size: must be positive, got {size!r}")
    bref = reference_bandwidth if reference_bandwidth is not None else _ref(topology)
    key = (topology.fingerprint, str(bref), contract, certify, exact_partitions, max_iter)
    unit = _CACHE.get(key) if cache else None
    if unit is None:
        unit = _lp_unit(topology, bref, contract, certify, exact_partitions, max_iter)
        _CACHE[key] = unit
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
    return _scaled(unit, m)


_CACHE: dict[tuple[object, ...], BoundResult] = {}
_CACHE_SIZE = 128


def clear_cache() -> None:
    """Forget every cached LP solve (benchmarks call this between runs)."""
    _CACHE.clear()


def _scaled(unit: BoundResult, m: Fraction) -> BoundResult:
    """The M = 1 result scaled to M = m (every bound is linear in M)."""
    secs = unit.seconds * m if isinstance(unit.seconds, Fraction) else unit.seconds * float(m)
    return dataclasses.replace(
        unit,
        seconds=secs,
        size=m,
        constraints=tuple(dataclasses.replace(c, seconds=c.seconds * m) for c in unit.constraints),
        lp_value=None if unit.lp_value is None else unit.lp_value * float(m),
    )


def _lp_unit(
    topology: Topology,
    bref: Fraction,
    contract: bool | None,
    certify: bool | None,
    exact_partitions: bool | None,
    max_iter: int,
) -> BoundResult:
    """:func:`lp_bound` for M = 1 byte (uncached)."""
    m = Fraction(1)
    start = time.perf_counter()
    if topology.num_ranks < 2:
        return BoundResult(
            Fraction(0), "lp", "a single GPU needs no communication", m, bref, Fraction(0)
        )
    g, contract, extra = search_graph(topology, contract)
    full_n = sum(1 for nd in topology.nodes if not nd.failed)
    t_val, pool, duals, iters, mode = _run(
        g, max_iter=max_iter, exact_partitions=exact_partitions, extra=extra
    )
    notes: list[str] = []
    certified: bool | None = None
    if contract:
        if certify is None:
            certify = full_n <= CERTIFY_UP_TO
        if certify:
            best = max(pool, key=lambda c: c.seconds)
            ok, bad, how = _certify(topology, best.seconds * m, m)
            certified = ok
            if ok:
                notes.append(
                    "LP on the graph with server islands contracted, certified on the original "
                    f"graph: {how}; partition heuristics found no violated constraint"
                )
            else:
                notes.append(
                    "contracted LP was not tight on the original graph "
                    f"({len(bad)} violated constraints); reran without contraction"
                )
                g, contract = from_topology(topology), False
                t_val, pool, duals, iters, mode = _run(
                    g,
                    max_iter=max_iter,
                    exact_partitions=exact_partitions,
                    extra=lifted_labelings(topology),
                )
        else:
            notes.append(
                "LP on the graph with server islands contracted: a relaxation, hence a valid "
                "lower bound; island-splitting constraints were not checked"
            )
    # exact value: the LP optimum is the largest rhs/c(A) in the final pool
    final = [
        dataclasses.replace(c, seconds=c.seconds * m, dual=d)
        for c, d in zip(pool, duals, strict=True)
    ]
    # ties: prefer a cut (easiest to read), then the largest dual
    best = max(final, key=lambda c: (c.seconds, c.kind == "cut", c.dual))
    cmax = g.cap_max()
    lp_seconds = t_val * float(m / cmax)
    exact = abs(float(best.seconds) - lp_seconds) <= 1e-6 * max(lp_seconds, 1e-300)
    seconds: Fraction | float = best.seconds if exact else lp_seconds
    if not exact:  # pragma: no cover - solver disagreement
        notes.append(f"solver value {lp_seconds!r} differs from the exact binding constraint")
    normalized: Fraction | float = (
        seconds / (m / bref) if isinstance(seconds, Fraction) else seconds * float(bref / m)
    )
    return BoundResult(
        seconds=seconds,
        method="lp",
        binding=best.description,
        size=m,
        reference_bandwidth=bref,
        normalized=normalized,
        exact=exact,
        constraints=tuple(final),
        iterations=iters,
        solve_time_s=time.perf_counter() - start,
        num_cuts=sum(1 for c in final if c.kind == "cut"),
        num_partitions=sum(1 for c in final if c.kind.startswith("partition")),
        contracted=bool(contract),
        certified=certified,
        partition_search=mode,
        lp_value=lp_seconds,
        notes=tuple(notes),
    )


def _debug(topology: Topology, size: Any) -> None:  # pragma: no cover
    r = lp_bound(topology, size)
    print(r.seconds, r.binding, r.iterations, r.solve_time_s)
