"""Shared encoding pieces: the happens-before graph and one helper per Z3 variable family.

The verifier keeps three steps apart: *encode* (build Z3 terms from a schedule),
*check* (run the solver, read ``sat`` / ``unsat`` / ``unknown``) and *decode* (turn a
model into a :class:`~resilientcc.verify.result.Counterexample`). This module holds
what the properties share:

* the **event graph**: every transfer ``t`` has a start event ``S_t`` (it reads
  ``src``) and an end event ``E_t`` (it writes ``dst``); the edges are
  ``S_t < E_t``, ``E_d < S_t`` for ``d`` in ``t.deps`` and ``S_a < S_b`` for
  consecutive transfers ``a, b`` of one connection ``(src, dst, channel)``
  (FIFO issue order);
* the Z3 variable families: :func:`start_var`, :func:`end_var`, :func:`issue_var`,
  :func:`contribution_var`, :func:`started_var`, :func:`done_var` (a failure point
  as a consistent cut, see :func:`cut_constraints`), :func:`outcome_var`;
* :func:`run_check`, which runs a solver under a time budget and returns the raw
  ``sat`` / ``unsat`` / ``unknown`` answer without conflating the last two.

Z3 is imported inside functions so that ``rcc`` pays for it only when verifying.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from resilientcc.schedules.ir import Schedule, Transfer

if TYPE_CHECKING:  # pragma: no cover
    import z3

__all__ = [
    "Deadline",
    "ScheduleGraph",
    "contribution_var",
    "cut_constraints",
    "done_var",
    "end_var",
    "issue_var",
    "outcome_var",
    "run_check",
    "start_var",
    "started_var",
]


# --------------------------------------------------------------------------- graph


@dataclass(frozen=True)
class ScheduleGraph:
    """Happens-before structure of a schedule (deps plus FIFO connection order).

    Attributes:
        schedule: the schedule.
    """

    schedule: Schedule

    @cached_property
    def transfers(self) -> tuple[Transfer, ...]:
        return tuple(sorted(self.schedule.transfers, key=lambda t: t.id))

    @cached_property
    def connections(self) -> dict[tuple[int, int, int], tuple[int, ...]]:
        """``(src, dst, channel) -> ids`` in FIFO (increasing id) order."""
        conns: dict[tuple[int, int, int], list[int]] = {}
        for t in self.transfers:
            conns.setdefault((t.src, t.dst, t.channel), []).append(t.id)
        return {k: tuple(v) for k, v in conns.items()}

    @cached_property
    def fifo_edges(self) -> tuple[tuple[int, int], ...]:
        """``(a, b)``: ``a`` is issued right before ``b`` on the same connection."""
        out: list[tuple[int, int]] = []
        for ids in self.connections.values():
            out.extend(itertools.pairwise(ids))
        return tuple(sorted(out))

    @cached_property
    def dep_edges(self) -> tuple[tuple[int, int], ...]:
        """``(d, t)``: ``d`` must complete before ``t`` starts."""
        return tuple((d, t.id) for t in self.transfers for d in sorted(set(t.deps)))

    @cached_property
    def successors(self) -> dict[int, tuple[int, ...]]:
        """Transfer-level edges: deps and FIFO order together."""
        succ: dict[int, set[int]] = {t.id: set() for t in self.transfers}
        for a, b in self.dep_edges:
            succ[a].add(b)
        for a, b in self.fifo_edges:
            succ[a].add(b)
        return {k: tuple(sorted(v)) for k, v in succ.items()}

    @cached_property
    def order(self) -> tuple[int, ...] | None:
        """A topological order of deps ∪ FIFO edges (smallest ready id first), or None."""
        indeg = {t.id: 0 for t in self.transfers}
        for vs in self.successors.values():
            for v in vs:
                indeg[v] += 1
        ready = [i for i, k in indeg.items() if k == 0]
        heapq.heapify(ready)
        out: list[int] = []
        while ready:
            i = heapq.heappop(ready)
            out.append(i)
            for v in self.successors[i]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(ready, v)
        return tuple(out) if len(out) == len(indeg) else None

    @cached_property
    def dep_order(self) -> tuple[int, ...] | None:
        """A topological order of ``deps`` only (the executor's order), or None on a cycle."""
        from resilientcc.errors import ScheduleError
        from resilientcc.schedules.executor import topological_order

        try:
            return topological_order(self.schedule)
        except ScheduleError:
            return None

    def find_cycle(self) -> tuple[tuple[int, int, str], ...]:
        """A cycle of deps ∪ FIFO edges as ``(from, to, "dep"|"fifo")`` triples, or ()."""
        kinds: dict[tuple[int, int], str] = {}
        for a, b in self.fifo_edges:
            kinds[(a, b)] = "fifo"
        for a, b in self.dep_edges:
            kinds[(a, b)] = "dep"
        color: dict[int, int] = {}
        parent: dict[int, int] = {}
        for root in (t.id for t in self.transfers):
            if root in color:
                continue
            stack: list[tuple[int, int]] = [(root, 0)]
            color[root] = 1
            while stack:
                v, i = stack[-1]
                succ = self.successors[v]
                if i < len(succ):
                    stack[-1] = (v, i + 1)
                    w = succ[i]
                    if color.get(w, 0) == 0:
                        color[w] = 1
                        parent[w] = v
                        stack.append((w, 0))
                    elif color[w] == 1:
                        path = [w]
                        y = v
                        back = []
                        while y != w:
                            back.append(y)
                            y = parent[y]
                        path.extend(reversed(back))
                        edges = []
                        for a, b in zip(path, [*path[1:], w], strict=True):
                            edges.append((a, b, kinds[(a, b)]))
                        return tuple(edges)
                else:
                    color[v] = 2
                    stack.pop()
        return ()

    @cached_property
    def position(self) -> dict[int, int]:
        """Index of each transfer in :attr:`order` (requires an acyclic graph)."""
        order = self.order
        if order is None:
            raise ValueError("dependency cycle")
        return {t: i for i, t in enumerate(order)}


# --------------------------------------------------------------------------- Z3 families


@functools.lru_cache(maxsize=1 << 18)
def start_var(tid: int, ctx: z3.Context | None = None) -> z3.ArithRef:
    """``S_t``: the (integer) time at which transfer ``t`` starts and reads its source."""
    import z3

    return z3.Int(f"S_{tid}", ctx)


@functools.lru_cache(maxsize=1 << 18)
def end_var(tid: int, ctx: z3.Context | None = None) -> z3.ArithRef:
    """``E_t``: the time at which transfer ``t`` completes and writes its destination."""
    import z3

    return z3.Int(f"E_{tid}", ctx)


@functools.lru_cache(maxsize=1 << 18)
def issue_var(tid: int, ctx: z3.Context | None = None) -> z3.ArithRef:
    """``I_t``: the (real) time at which transfer ``t`` is issued (deadlock encoding).

    Real, not integer: strict difference constraints are feasible over the reals iff
    they are over the integers (both iff the graph has no cycle), and Z3's simplex
    (``QF_LRA``) is insensitive to the order the constraints arrive in.
    """
    import z3

    return z3.Real(f"I_{tid}", ctx)


@functools.lru_cache(maxsize=1 << 18)
def contribution_var(chunk: int | None = None, ctx: z3.Context | None = None) -> z3.ArithRef:
    """``k`` (or ``k_c``): the symbolic contribution (a rank) tracked in a chunk slice.

    Slices solved one at a time share one ``k``; formulas over several chunks at
    once (failover) use one ``k_c`` per chunk.
    """
    import z3

    return z3.Int("k" if chunk is None else f"k_{chunk}", ctx)


@functools.lru_cache(maxsize=1 << 18)
def started_var(tid: int, cut: int, ctx: z3.Context | None = None) -> z3.BoolRef:
    """``started_t@i``: transfer ``t`` has started (read its source) at failure point ``i``."""
    import z3

    return z3.Bool(f"started_{tid}@{cut}", ctx)


@functools.lru_cache(maxsize=1 << 18)
def done_var(tid: int, cut: int, ctx: z3.Context | None = None) -> z3.BoolRef:
    """``done_t@i``: transfer ``t`` has completed (written its destination) at point ``i``."""
    import z3

    return z3.Bool(f"done_{tid}@{cut}", ctx)


def cut_constraints(graph: ScheduleGraph, cut: int, ctx: z3.Context | None = None) -> list[Any]:
    """A failure point as a *consistent cut* of the execution.

    ``done ⇒ started``; ``started_t ⇒ done_d`` for each dep ``d``; ``started_b ⇒
    started_a`` for FIFO predecessor ``a``. Every such assignment is the state at
    some instant of some allowed execution and vice versa (schedule the done
    transfers first, then start the rest of the started ones).
    """
    import z3

    out: list[Any] = []
    for tr in graph.transfers:
        out.append(z3.Implies(done_var(tr.id, cut, ctx), started_var(tr.id, cut, ctx)))
    for d, t in graph.dep_edges:
        out.append(z3.Implies(started_var(t, cut, ctx), done_var(d, cut, ctx)))
    for a, b in graph.fifo_edges:
        out.append(z3.Implies(started_var(b, cut, ctx), started_var(a, cut, ctx)))
    return out


@functools.lru_cache(maxsize=1 << 18)
def outcome_var(tid: int, attempt: int, ctx: z3.Context | None = None) -> z3.ArithRef:
    """``O_{t,a}``: what happened to attempt ``a`` of ``t`` when its channel died.

    0 = delivered (committed at the receiver, acknowledgement lost), 1 = half-delivered,
    2 = lost. The sender cannot tell them apart.
    """
    import z3

    return z3.Int(f"O_{tid}_{attempt}", ctx)


def timing_constraints(
    graph: ScheduleGraph, ids: Iterable[int] | None = None, ctx: z3.Context | None = None
) -> list[Any]:
    """Difference constraints of the event graph: ``S<E``, deps ``E_d<S_t``, FIFO ``S_a<S_b``."""
    keep = None if ids is None else set(ids)
    out: list[Any] = []
    for tr in graph.transfers:
        if keep is None or tr.id in keep:
            out.append(start_var(tr.id, ctx) < end_var(tr.id, ctx))
    for d, t in graph.dep_edges:
        if keep is None or (d in keep and t in keep):
            out.append(end_var(d, ctx) < start_var(t, ctx))
    for a, b in graph.fifo_edges:
        if keep is None or (a in keep and b in keep):
            out.append(start_var(a, ctx) < start_var(b, ctx))
    return out


# --------------------------------------------------------------------------- checking


class Deadline:
    """A wall-clock budget shared by the Z3 calls of one verification."""

    def __init__(self, timeout_s: float | None) -> None:
        self.t0 = time.perf_counter()
        self.timeout_s = timeout_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def remaining_ms(self) -> int | None:
        """Milliseconds left (at least 1), or None when unlimited."""
        if self.timeout_s is None:
            return None
        return max(1, int((self.timeout_s - self.elapsed()) * 1000))

    def expired(self) -> bool:
        return self.timeout_s is not None and self.elapsed() >= self.timeout_s


def run_check(solver: Any, deadline: Deadline, *assumptions: Any) -> tuple[str, str]:
    """Run ``solver.check`` within the deadline.

    Returns:
        ``("sat", "")``, ``("unsat", "")`` or ``("unknown", reason)`` — kept apart.
    """
    import z3

    ms = deadline.remaining_ms()
    if ms is not None:
        if deadline.expired():
            return "unknown", "timeout (budget spent before this check)"
        solver.set("timeout", ms)
    res = solver.check(*assumptions)
    if res == z3.sat:
        return "sat", ""
    if res == z3.unsat:
        return "unsat", ""
    return "unknown", str(solver.reason_unknown())
