"""Lossless / exactly-once: every final multiplicity is exactly 1.

Encoding, sliced per chunk ``c`` (chunks never exchange data). The contribution is
*symbolic*: one integer ``k_c`` with ``0 ≤ k_c < p`` stands for every contribution at
once. The multiplicity of contribution ``k_c`` in rank ``r``'s copy of chunk ``c`` is a
term built in SSA form along the dependency order (the executor's order; for a
race-free schedule every allowed order gives the same terms)::

    m⁰_r        = ite(k_c = r, 1, 0)
    reduce s→d: mⁱ⁺¹_d = mⁱ_d + n_t · mⁱ_s      (n_t = 1 commit; failover may add more)
    copy   s→d: mⁱ⁺¹_d = mⁱ_s

and Z3 is asked ``0 ≤ k_c < p ∧ ⋁_r m^final_r ≠ 1``. ``unsat`` for every chunk is
the proof; a model names the contribution, the rank (the disjunct that is true)
and the wrong multiplicity.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from resilientcc.schedules.ir import COPY, Schedule
from resilientcc.verify.encode import Deadline, ScheduleGraph, contribution_var, run_check
from resilientcc.verify.result import PROVED, UNKNOWN, VIOLATED, Counterexample, PropertyResult

__all__ = [
    "check_lossless",
    "chunk_orders",
    "chunk_signature",
    "chunk_terms",
    "initial_multiplicity",
]

PROPERTY = "lossless"


def initial_multiplicity(k: Any, rank: int) -> Any:
    """``ite(k = rank, 1, 0)``: rank ``rank`` initially holds its own contribution once."""
    import z3

    return z3.If(k == rank, z3.IntVal(1), z3.IntVal(0))


def chunk_terms(
    schedule: Schedule,
    chunk: int,
    order: tuple[int, ...],
    k: Any,
    extra_commits: Mapping[int, Any] | None = None,
) -> list[Any]:
    """Final multiplicity terms ``[m_r for r in ranks]`` of contribution ``k`` in ``chunk``.

    Args:
        extra_commits: optional ``tid -> Z3 Int term`` in 0..2: how many *extra* times the
            receiver commits ``tid`` (failover without dedup). A repeated reduce adds
            the data again; a repeated copy writes the same data again.
    """
    import z3

    by_id = schedule.by_id
    state = [initial_multiplicity(k, r) for r in range(schedule.ranks)]
    for tid in order:
        t = by_id[tid]
        if chunk not in t.chunk_ids:
            continue
        src = state[t.src]
        if t.op == COPY:
            state[t.dst] = src
        else:
            n = extra_commits.get(tid) if extra_commits else None
            if n is None:
                state[t.dst] = state[t.dst] + src
            else:  # at most two extra commits; kept linear (no product of two terms)
                state[t.dst] = state[t.dst] + src + z3.If(n >= 1, src, 0) + z3.If(n >= 2, src, 0)
    return state


def chunk_orders(schedule: Schedule, order: tuple[int, ...]) -> dict[int, tuple[int, ...]]:
    """``chunk -> ids of its transfers`` in ``order`` (computed once, used per slice)."""
    by_id = schedule.by_id
    out: dict[int, list[int]] = {}
    for tid in order:
        for c in by_id[tid].chunk_ids:
            out.setdefault(c, []).append(tid)
    return {c: tuple(v) for c, v in out.items()}


def chunk_signature(schedule: Schedule, chunk: int, order: tuple[int, ...]) -> tuple[object, ...]:
    """The chunk's transfer sequence with ranks renamed in order of first appearance.

    Two chunks with equal signatures give the same lossless formula up to a
    permutation of ranks, and the postcondition is invariant under such permutations,
    so one Z3 proof covers both (symmetry reduction).
    """
    by_id = schedule.by_id
    names: dict[int, int] = {}
    seq: list[tuple[int, int, str]] = []
    for tid in order:
        t = by_id[tid]
        if chunk in t.chunk_ids:
            a = names.setdefault(t.src, len(names))
            b = names.setdefault(t.dst, len(names))
            seq.append((a, b, t.op))
    return (schedule.ranks, tuple(seq))


def _decode(
    schedule: Schedule, chunk: int, model: Any, k: Any, finals: list[Any]
) -> tuple[int, int, int]:
    kv = model.eval(k, model_completion=True).as_long()
    for r, m in enumerate(finals):
        v = model.eval(m, model_completion=True).as_long()
        if v != 1:
            return r, kv, v
    raise AssertionError("model has no wrong multiplicity")  # pragma: no cover


def check_lossless(
    schedule: Schedule,
    *,
    timeout_s: float | None = None,
    graph: ScheduleGraph | None = None,
) -> PropertyResult:
    """Prove that every rank ends with every contribution exactly once, for every chunk.

    Examples:
        >>> from fractions import Fraction
        >>> from resilientcc.schedules.ir import Schedule, Transfer, uniform_chunks
        >>> ts = (Transfer(0, 0, 1, 0, "reduce"), Transfer(1, 1, 0, 0, "reduce", deps=(0,)))
        >>> r = check_lossless(Schedule("bad", 2, Fraction(8), uniform_chunks(1), ts))
        >>> r.verdict, r.counterexample.multiplicity
        ('violated', 2)
    """
    import z3

    t0 = time.perf_counter()
    deadline = Deadline(timeout_s)
    g = graph or ScheduleGraph(schedule)
    order = g.dep_order
    if order is None:
        return PropertyResult(
            PROPERTY, UNKNOWN, None, time.perf_counter() - t0, "dependency cycle: see deadlock"
        )
    p = schedule.ranks
    nchunks = len(schedule.chunks)
    solver = z3.SolverFor("QF_LIA")
    unknown_reason = ""
    k = contribution_var()
    seen: set[tuple[object, ...]] = set()
    orders = chunk_orders(schedule, order)
    for c in range(nchunks):
        sig = chunk_signature(schedule, c, orders.get(c, ()))
        if sig in seen:  # same formula up to renaming ranks: already proved
            continue
        seen.add(sig)
        finals = chunk_terms(schedule, c, orders.get(c, ()), k)
        solver.push()
        solver.add(k >= 0, k < p, z3.Or([m != 1 for m in finals]))
        answer, reason = run_check(solver, deadline)
        if answer == "sat":
            r, kv, v = _decode(schedule, c, solver.model(), k, finals)
            touching = tuple(
                schedule.by_id[t]
                for t in order
                if c in schedule.by_id[t].chunk_ids and r == schedule.by_id[t].dst
            )
            cex = Counterexample(
                PROPERTY,
                f"rank {r} ends with contribution {kv} of chunk {c} counted {v} times",
                transfers=touching[-6:],
                rank=r,
                chunk=c,
                contribution=kv,
                multiplicity=v,
                trace=(f"z3 model: k_{c} = {kv}",),
            )
            return PropertyResult(
                PROPERTY, VIOLATED, cex, time.perf_counter() - t0, f"z3 sat in chunk slice {c}"
            )
        solver.pop()
        if answer == "unknown":
            unknown_reason = reason
            if deadline.expired():
                break
    secs = time.perf_counter() - t0
    if unknown_reason:
        return PropertyResult(PROPERTY, UNKNOWN, None, secs, f"z3: {unknown_reason}")
    return PropertyResult(
        PROPERTY,
        PROVED,
        None,
        secs,
        f"z3 unsat in {len(seen)} chunk slices (symbolic contribution; "
        f"{nchunks} chunks up to rank renaming)",
    )
